// Behavioural model of the ECP5 DP16KD block RAM, only in the
// configurations hdl/ram.py's WideRAM "ecp5" form uses: DATA_WIDTH 4, 9 or
// 18, the same on both ports (4096 x 4, the word address on AD[13:2];
// 2048 x 9 on AD[13:3]; 1024 x 18 on AD[13:4], port A's AD[1:0] its byte
// write enables, both high; data on DI/DO from bit 0), port A writes,
// port B reads, REGMODE NOREG or OUTREG, chip selects tied
// low with CSDECODE "0b000", resets tied low. Yosys 0.70's
// share/ecp5/cells_sim.v declares DP16KD as a blackbox (no behaviour), so
// this is a reading of Lattice's documentation (the ECP5 memory
// usage guide, TN1264): the array read is registered by CEB, the optional output
// register loads on the next edge with OCEB. Port names and parameters are
// checked against cells_sim.v's declaration by tests/test_ram.py. Any other
// configuration stops the simulation.
//
// `netagg generate` appends this module to a core whose RAMs are DP16KD
// instances, so that the file is complete for simulators. The blackbox
// attribute makes Yosys read it as the declaration of the primitive (its
// body is dropped; synth_ecp5 maps the instances to the block RAM with
// its output register); simulators ignore the attribute. The run-time
// checks are outside SYNTHESIS (Yosys defines it), as Yosys does not
// parse $finish in an always block.
`timescale 1ns / 1ps
(* blackbox *)
module DP16KD (
  input DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
  input ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0,
  input CEA, OCEA, CLKA, WEA, RSTA,
  input CSA2, CSA1, CSA0,
  output DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
  input DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
  input ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0,
  input CEB, OCEB, CLKB, WEB, RSTB,
  input CSB2, CSB1, CSB0,
  output DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
  parameter DATA_WIDTH_A = 18;
  parameter DATA_WIDTH_B = 18;
  parameter REGMODE_A = "NOREG";
  parameter REGMODE_B = "NOREG";
  parameter RESETMODE = "SYNC";
  parameter ASYNC_RESET_RELEASE = "SYNC";
  parameter CSDECODE_A = "0b000";
  parameter CSDECODE_B = "0b000";
  parameter WRITEMODE_A = "NORMAL";
  parameter WRITEMODE_B = "NORMAL";
  parameter GSR = "ENABLED";

  localparam W = DATA_WIDTH_A;
  localparam LOW = (W == 18) ? 4 : (W == 9) ? 3 : 2;
  reg [17:0] mem [0:4095];
  wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
  wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
  wire [11:0] wa = ada >> LOW;
  wire [11:0] ra = adb >> LOW;
  wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
  wire [17:0] mask = (W == 18) ? 18'h3ffff : (W == 9) ? 18'h001ff : 18'h0000f;
  wire [17:0] di = dia & mask;
  reg [17:0] latch_b, out_b;
  wire [17:0] dob = (REGMODE_B == "OUTREG") ? out_b : latch_b;

  initial begin
    if (DATA_WIDTH_A != DATA_WIDTH_B || (W != 4 && W != 9 && W != 18)
        || CSDECODE_A != "0b000" || CSDECODE_B != "0b000"
        || (REGMODE_B != "NOREG" && REGMODE_B != "OUTREG")) begin
      $display("DP16KD model: configuration not modelled");
      $finish;
    end
  end

`ifndef SYNTHESIS
  // x18: both byte enables must be high (the form writes whole words)
  always @(posedge CLKA)
    if (CEA && WEA && W == 18 && ada[1:0] != 2'b11) begin
      $display("DP16KD model: partial x18 write not modelled");
      $finish;
    end

  always @(posedge CLKB)
    if (WEB || RSTB || RSTA) begin
      $display("DP16KD model: port B write or reset not modelled");
      $finish;
    end
`endif

  always @(posedge CLKA)
    if (CEA && WEA && {CSA2, CSA1, CSA0} == 3'b000)
      mem[wa] <= di;

  always @(posedge CLKB) begin
    if (CEB && {CSB2, CSB1, CSB0} == 3'b000)
      latch_b <= mem[ra];
    if (OCEB)
      out_b <= latch_b;
  end

  assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4,
          DOB3, DOB2, DOB1, DOB0} = dob & mask;
  assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4,
          DOA3, DOA2, DOA1, DOA0} = 18'b0;
endmodule
