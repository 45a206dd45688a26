// Behavioural model of the Lattice ECP5 MULT18X18D multiplier for simulation, written by
// codnn from Lattice TN1267 (ECP5 sysDSP Usage Guide): P = A * B, each operand two's
// complement when its SIGNEDA / SIGNEDB input is high, else unsigned. Each of the input A,
// input B, pipeline and output registers is either bypassed ("NONE") or clocked by CLK0
// with clock enable CE0 and synchronous reset RST0. Only the ports and the register
// settings codnn's gateware uses (hw/common/multiplier.py: SOURCEA/SOURCEB low) are
// modelled; another register setting stops the simulation.
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_PIPELINE_CLK = "NONE",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter GSR = "ENABLED"
) (
    input A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
    input B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0,
    output P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16,
        P17, P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32,
        P33, P34, P35
);
    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3,
        A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3,
        B2, B1, B0};
    reg [17:0] a_reg = 18'd0, b_reg = 18'd0;
    reg signa_reg = 1'b0, signb_reg = 1'b0;
    reg [35:0] pipeline_reg = 36'd0, output_reg = 36'd0;
    wire [17:0] a_in = REG_INPUTA_CLK == "CLK0" ? a_reg : a;
    wire [17:0] b_in = REG_INPUTB_CLK == "CLK0" ? b_reg : b;
    wire signa = REG_INPUTA_CLK == "CLK0" ? signa_reg : SIGNEDA;
    wire signb = REG_INPUTB_CLK == "CLK0" ? signb_reg : SIGNEDB;
    wire signed [36:0] a_ext = {{19{signa & a_in[17]}}, a_in};
    wire signed [36:0] b_ext = {{19{signb & b_in[17]}}, b_in};
    wire signed [73:0] full = a_ext * b_ext;
    wire [35:0] product = full[35:0];
    wire [35:0] piped = REG_PIPELINE_CLK == "CLK0" ? pipeline_reg : product;
    wire [35:0] result = REG_OUTPUT_CLK == "CLK0" ? output_reg : piped;
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21,
        P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4,
        P3, P2, P1, P0} = result;

    always @(posedge CLK0) begin
        if (RST0) begin
            a_reg <= 18'd0; b_reg <= 18'd0; signa_reg <= 1'b0; signb_reg <= 1'b0;
            pipeline_reg <= 36'd0; output_reg <= 36'd0;
        end else if (CE0) begin
            a_reg <= a; b_reg <= b; signa_reg <= SIGNEDA; signb_reg <= SIGNEDB;
            pipeline_reg <= product; output_reg <= piped;
        end
    end

    initial begin
        if ((REG_INPUTA_CLK != "NONE" && REG_INPUTA_CLK != "CLK0")
                || (REG_INPUTB_CLK != "NONE" && REG_INPUTB_CLK != "CLK0")
                || (REG_PIPELINE_CLK != "NONE" && REG_PIPELINE_CLK != "CLK0")
                || (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0")) begin
            $display("MULT18X18D model: registers must be clocked by CLK0 or bypassed");
            $finish;
        end
    end
endmodule
