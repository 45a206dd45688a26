// Behavioural model of the ECP5 output DDR flip-flop ODDRX1F, for simulation: D0 and D1
// are taken at a rising edge of SCLK; Q is D0 while SCLK is high, then D1 while it is low.
module ODDRX1F (input D0, input D1, input SCLK, input RST, output Q);
    reg rising_value = 1'b0, falling_value = 1'b0, low_phase = 1'b0;
    always @(posedge SCLK) begin
        rising_value <= D0;
        falling_value <= D1;
    end
    always @(negedge SCLK) low_phase <= falling_value;
    assign Q = SCLK ? rising_value : low_phase;
endmodule
