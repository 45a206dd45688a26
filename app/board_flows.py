"""Flows on a board top through the UART host link, checked against golden: a layer
(``codnn run``: a packed layer on the systolic array, a term-quantized one on the TQ
array) and gradient messages through a NIC engine (``codnn stream``). Each runs on a
board's serial port or, with ``sim``, on the board top on Verilator with a simulated
serial line (``codnn.sim.uart_bridge``; the same driver code)."""

import numpy as np

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.golden.value_frames import NicCodec

from .board import Board, LinkError, open_serial
from .flows import ParameterError

__all__ = ["run_compiled_on_device", "run_layer_file", "run_network_on_device",
           "stream_gradient_file"]


def _on_board(host, sim_design, port, baud):
    """``host(serial port)`` on ``sim_design()`` on Verilator or on ``port``; a simulator
    that is missing or fails is a ``LinkError``."""
    if sim_design is None:
        return host(open_serial(port, baud))
    from codnn.sim.runner import SimulationFailure
    from codnn.sim.simulators import SimulatorMissing, use_simulator
    from codnn.sim.uart_bridge import run_with_port
    try:
        use_simulator("verilator")          # before a design that would go unused
    except SimulatorMissing as error:
        raise LinkError(f"the simulated board top: {error}") from None
    try:
        dut = sim_design()
    except (TypeError, ValueError) as error:
        raise ParameterError(str(error)) from None
    try:
        return run_with_port(dut, 4, host)
    except SimulationFailure as error:
        raise LinkError(f"the simulated board top: {error}") from None


def run_network_on_device(network, q, *, rows, cols, alpha, port=None, baud=115200,
                          sim_depth=None, progress=None):
    """Run an integer network (``codnn.golden.network.IntegerNetwork``) on inputs ``q`` on the
    board at ``port`` or, with ``sim_depth``, on the board top in simulation (``rows x
    cols``, ``sim_depth`` vectors of data memory; the systolic array with ``alpha``, or
    the TQ array with the network's term quantization); the device's array must be that
    one. Returns ``(outputs, cycles per layer)``.

    Raises
    ------
    ParameterError
        If the device's array is not the one asked for.
    codnn.model.on_board.BoardMismatch
        If a result differs from golden.
    """
    from .engines import BOARD_DESIGNS
    from .model.on_board import run_network_on_board

    from codnn.golden.term_quant import ENCODINGS
    tq = network.array_layers[0].tq
    wanted = {"rows": rows, "cols": cols}
    if tq is None:
        wanted["alpha"] = alpha
    else:
        wanted.update(g=tq.g, alpha=tq.alpha, beta=tq.beta, mag_bits=tq.mag_bits,
                      encoding=ENCODINGS.index(tq.encoding))

    def host(serial):
        board = Board(serial)
        status = board.status()
        device = {"rows": status.rows, "cols": status.cols,
                  **{k: status.config.get(k) for k in wanted if k not in ("rows", "cols")}}
        if device != wanted:
            raise ParameterError(f"the device's array has {device}, not {wanted}")
        return run_network_on_board(network, q, board, progress=progress)

    def design():
        size = {"rows": rows, "cols": cols, "depth": sim_depth, "divisor": 4,
                "timeout_bytes": 16}
        if tq is None:
            return BOARD_DESIGNS["systolic"].build(alpha=alpha, **size)
        return BOARD_DESIGNS["tq"].build(g=tq.g, budget=tq.alpha, beta=tq.beta,
                                         mag_bits=tq.mag_bits, encoding=tq.encoding, **size)

    return _on_board(host, None if sim_depth is None else design, port, baud)


def run_compiled_on_device(compiled, q, *, port=None, baud=115200, sim=False, progress=None):
    """Load a compiled network (``codnn.model.compile.CompiledNetwork``) into the network
    engine's board top at ``port`` (or, with ``sim``, a board top built for it in
    simulation) and run the integer inputs ``q`` one by one: the host sends each image and
    reads the class and the outputs. Returns a report: per image the class, whether the
    outputs equal the program's golden run and the class golden's first largest value,
    and the engine's cycles against the model; ``result`` is ``"pass"`` when all do.

    Raises
    ------
    ParameterError
        If the device's engine or memories are not the program's.
    codnn.board.DeviceError, codnn.board.LinkError, OSError
        As ``run_layer_file``.
    """
    from codnn.golden.network_program import run_program
    from codnn.hw.soc import NetworkSoc
    program, image = compiled.program, compiled.image

    def host(serial):
        board = Board(serial)
        try:
            board.load_network(program, image)
        except ValueError as error:
            raise ParameterError(str(error)) from None
        runs = []
        for k, x in enumerate(q):
            runs.append(board.run_image(program, x))
            if progress:
                progress(k + 1, len(q))
        return runs

    def design():
        return NetworkSoc.for_program(program, divisor=4, timeout_bytes=16)

    runs = _on_board(host, design if sim else None, port, baud)
    images = []
    for x, (values, label, cycles) in zip(q, runs):
        want = run_program(program, image, x)
        images.append({"class": label, "outputs_equal_golden": bool(np.array_equal(values, want)),
                       "class_equal_golden": label == int(np.argmax(want)),
                       "cycles": cycles, "cycles_equal_model": cycles == compiled.cycles})
    ok = all(r["outputs_equal_golden"] and r["class_equal_golden"] and r["cycles_equal_model"]
             for r in images)
    return {"device": "simulated board top" if sim else port, "images": images,
            "result": "pass" if ok else "FAIL"}


def run_layer_file(layers, inputs, *, layer=None, port=None, baud=115200, sim=None,
                   progress=None):
    """Run one layer of ``layers`` (written by ``codnn pack`` or ``codnn quantize``) on the
    integer inputs of ``inputs`` (channels x vectors, ``.npy``); return a report whose
    ``result`` is ``"pass"`` when every accumulator equals golden.

    ``sim`` (``{"rows", "cols", "depth", "beta"}``) runs the matching board top in
    simulation instead of the board on ``port``. ``progress(done, total, cycles)`` follows
    the runs on the device.

    Raises
    ------
    ParameterError
        For a bad file, layer name, input shape, or a device whose array does not match.
    codnn.board.DeviceError, codnn.board.LinkError, OSError
        When the device answers with an error, does not answer, or the port fails.
    """
    from codnn.golden.systolic import run_layer
    from codnn.golden.tq_array import run_tq_layer
    from codnn.golden.term_quant import ENCODINGS

    from .engines import BOARD_DESIGNS
    from .packfile import load_packed, read_layer_arrays
    from .quantfile import load_quantized
    arrays = read_layer_arrays(layers, "layer", "codnn pack or codnn quantize")
    tq = all("tq" in entry for entry in arrays.values())     # codnn quantize writes <layer>/tq
    loaded = load_quantized(layers) if tq else load_packed(layers)
    name = layer or next(iter(loaded))
    if name not in loaded:
        raise ParameterError(f"{layers} has no layer {name!r}; it has {', '.join(loaded)}")
    chosen = loaded[name]
    columns = chosen.q.shape[1] if tq else chosen.columns
    try:
        X = np.load(inputs, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ParameterError(f"{inputs} is not a readable .npy file ({error})") from None
    if X.ndim != 2 or X.shape[0] != columns or not np.issubdtype(X.dtype, np.integer):
        raise ParameterError(f"{inputs}: expected integer inputs of shape ({columns}, T), "
                             f"not {X.dtype} {X.shape}")

    def host(serial):
        board = Board(serial)
        status = board.status()
        try:
            if tq:
                device = {k: status.config.get(k) for k in ("g", "alpha", "mag_bits")}
                code = status.config["encoding"]
                device["encoding"] = ENCODINGS[code] if code < len(ENCODINGS) else code
                mine = {"g": chosen.g, "alpha": chosen.alpha, "mag_bits": chosen.mag_bits,
                        "encoding": chosen.encoding}
                if device != mine:
                    raise ValueError(f"the device's TQ array has {device}, the layer {mine}")
                acc, cycles = board.run_tq_layer(chosen.q, X, progress=progress)
            else:
                acc, cycles = board.run_layer(chosen, X, progress=progress)
        except ValueError as error:
            raise ParameterError(str(error)) from None
        return status, acc, cycles

    def design():
        size = {"rows": sim["rows"], "cols": sim["cols"], "depth": sim["depth"], "divisor": 4,
                "timeout_bytes": 16}
        if tq:
            return BOARD_DESIGNS["tq"].build(
                g=chosen.g, budget=chosen.alpha, beta=sim["beta"], mag_bits=chosen.mag_bits,
                encoding=chosen.encoding, **size)
        return BOARD_DESIGNS["systolic"].build(alpha=chosen.alpha, **size)

    status, acc, cycles = _on_board(host, None if sim is None else design, port, baud)
    size = {"rows": status.rows, "cols": status.cols, "acc_bits": status.acc_bits}
    config = status.config
    if tq:
        _, want = run_tq_layer(chosen.q, X, g=chosen.g, alpha=chosen.alpha, beta=config["beta"],
                               encoding=chosen.encoding, mag_bits=chosen.mag_bits, **size)
        array = (f"TQ {status.rows}x{status.cols}, g {config['g']}, alpha {config['alpha']}, "
                 f"beta {config['beta']}")
    else:
        _, want = run_layer(chosen, X, alpha=config["alpha"], **size)
        array = f"{status.rows}x{status.cols}, alpha {config['alpha']}"
    ok = bool(np.array_equal(acc, want))
    return {"layer": name, "device": "simulated board top" if sim is not None else port,
            "array": array, "vectors": int(X.shape[1]), "device_cycles": cycles,
            "result": "pass" if ok else "FAIL"}


def stream_gradient_file(gradients, *, message_values, bound_bits=DEFAULT_BOUND_BITS, seed=0,
                         scaler=None, port=None, baud=115200, sim=None):
    """Send the gradients of a ``.npy``/``.npz`` as messages of ``message_values`` values
    through the NIC engine of a board top (decoders get golden's encoding of them) and
    compare every output byte with golden; return a report whose ``result`` is ``"pass"``
    when all match.

    ``sim`` (``{"kind", "lanes", "depth"}``) runs that board top in simulation instead of
    the board on ``port``.

    Raises
    ------
    ParameterError
        For a bad file or setting, a device that is not a NIC engine, or a message whose
        output does not fit the device.
    codnn.board.DeviceError, codnn.board.LinkError, OSError
        As ``run_layer_file``.
    """
    from codnn.golden.inceptionn import check_bound_bits
    from codnn.hw.nic import NIC_ENGINES
    from codnn.hw.soc.protocol import EngineKind

    from .engines import BOARD_DESIGNS
    from .gradfile import load_gradients
    try:
        check_bound_bits(bound_bits)
    except ValueError as error:
        raise ParameterError(str(error)) from None
    values = load_gradients(gradients).reshape(-1)
    messages = [values[k:k + message_values] for k in range(0, len(values), message_values)]

    def host(serial):
        board = Board(serial)
        status = board.status()
        if status.engine != EngineKind.NIC:
            raise ParameterError(f"the device runs the {status.engine.name.lower()} array, "
                                 f"not a NIC engine")
        kind, lanes = list(NIC_ENGINES)[status.config["kind"]], status.config["lanes"]
        engine = NIC_ENGINES[kind]
        codec = NicCodec(engine.codec, takes=engine.takes, gives=engine.gives,
                         bound_bits=bound_bits, seed=seed, scaler=scaler, messages=messages)
        frames = [codec.frames(lanes, x) for x in messages]
        settings = {"bound_bits": bound_bits, "seed": codec.seed,
                    "scaler": int(np.float32(codec.scaler).view(np.uint32))}
        names = {name for name, _, _ in engine.settings}
        try:
            outputs, report, cycles = board.run_frames(
                [frame for frame, _, _ in frames],
                **{k: v for k, v in settings.items() if k in names})
        except ValueError as error:
            raise ParameterError(f"{error}: send fewer --message-values") from None
        return kind, lanes, frames, outputs, report, cycles

    def design():
        return BOARD_DESIGNS["nic"].build(kind=sim["kind"], lanes=sim["lanes"],
                                          depth=sim["depth"], divisor=4, timeout_bytes=16)

    kind, lanes, frames, outputs, report, cycles = _on_board(
        host, None if sim is None else design, port, baud)
    ok = outputs == [want for _, want, _ in frames]
    sent, received = sum(len(f) for f, _, _ in frames), sum(len(o) for o in outputs)
    return {"engine": kind, "lanes": lanes,
            "device": "simulated board top" if sim is not None else port,
            "messages": len(messages), "values": int(len(values)), "bytes_in": sent,
            "bytes_out": received, "ratio": round(sent / received, 3) if received else None,
            "device_cycles": cycles, **report, "result": "pass" if ok else "FAIL"}
