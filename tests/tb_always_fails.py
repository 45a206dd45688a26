"""A cocotb testbench that must fail: it checks the runner reports failures properly."""

import cocotb

from codnn.sim.testbench import load_config, start_clock_and_reset


@cocotb.test()
async def output_is_never_valid_after_reset(dut):
    config = load_config()
    await start_clock_and_reset(dut)
    assert int(dut.o__valid.value) == 1, f"o.valid is low after reset (seed {config['seed']})"
