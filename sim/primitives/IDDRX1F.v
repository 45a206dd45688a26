// Behavioural model of the ECP5 input DDR flip-flop IDDRX1F, for simulation: D is taken at
// each rising and each falling edge of SCLK; at a rising edge Q0 gets the value taken at
// the rising edge before and Q1 the value taken at the falling edge between them.
module IDDRX1F (input D, input SCLK, input RST, output reg Q0 = 1'b0, output reg Q1 = 1'b0);
    reg at_rising = 1'b0, at_falling = 1'b0;
    always @(posedge SCLK) begin
        at_rising <= D;
        Q0 <= at_rising;
        Q1 <= at_falling;
    end
    always @(negedge SCLK) at_falling <= D;
endmodule
