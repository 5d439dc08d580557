// Minimal reproducer (docs/yosys-abc9-assert.md): a register named like a
// bit select of another register. YoWASP Yosys 0.70, `synth_ecp5` fails in
// ABC_OPS_REINTEGRATE with
//   ERROR: Assert `count_id(wire->name) == 0' failed in kernel/rtlil.cc:2872.
// (the full netagg core fails at the same step with
//   Assert `GetSize(conn.first) == GetSize(conn.second)' failed in kernel/rtlil.cc:3091).
// Renaming `\d[0] ` to `d_0_` (netagg.hdl.netlist.fix_verilog) makes it pass.
module top(input clk, input [3:0] a, input [3:0] b, output reg [3:0] q);
  reg [3:0] d;
  reg [3:0] \d[0] ;
  always @(posedge clk) begin
    d <= a;
    \d[0] <= b;
    q <= d ^ \d[0] ;
  end
endmodule
