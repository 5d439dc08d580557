"""The slot table's lane loop: the accumulators' read-add-write loop
through L lanes, and the RESULT beats it produces."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from netagg.hdl import layouts
from netagg.hdl.checked import CheckedComponent
from netagg.hdl.lane import Lane, LaneSel, decode_sel, widen_b
from netagg.hdl.layouts import DType
from netagg.hdl.netlist import KEEP
from netagg.hdl.ram import DP16KD_DEPTH, WideRAM, dp16kd_shape
from netagg.hdl.slot_layouts import acc_word, result_beat
from netagg.hdl.validator import payload_beat
from netagg.params import Params

__all__ = ["ACC_RAM_FORMS", "LaneLoop", "loop_beat"]


def acc_addr_bits(params: Params) -> int:
    """Bits of an accumulator address, (slot x 2 + ver) x K/L + beat."""
    return layouts.bits_for(2 * params.slots * params.beats)


def loop_beat(params: Params) -> data.StructLayout:
    """A beat issued to the loop: which accumulators, and what to do."""
    return data.StructLayout({
        "rtx": unsigned(1),       # a retransmitted beat: read out as a RESULT beat, no lanes
        "addr": unsigned(acc_addr_bits(params)),
        "mask": unsigned(params.lanes),   # lanes holding elements
        "last": unsigned(1),      # the message's last beat
        "first": unsigned(1),     # first contribution of a round: r = to_acc(b)
        "result": unsigned(1),    # the new accumulators go out as a RESULT beat
        "bf16": unsigned(1),      # a bf16 round (flag on the RESULT beat)
        "dtype": layouts.DType,
        "op": layouts.Op,
    })


def _kept(m: Module, value, name: str) -> Signal:
    """``value`` registered in a kept register (:data:`KEEP`) of its own."""
    reg = Signal(Value.cast(value).shape(), name=name, attrs=KEEP)
    m.d.sync += reg.eq(value)
    return reg


def _forward(entry, history, hit, field, i=None):
    """The operand's ``field`` (lane ``i``'s element of ``data``): the RAM
    entry, or the most recent write-back whose registered select in ``hit``
    is set (bit k for ``history[k]``)."""
    def pick(word):
        v = word[field]
        return v if i is None else v[i]
    operand = pick(entry)
    for k in reversed(range(len(history))):
        operand = Mux(hit[k], pick(history[k][2]), operand)
    return operand


def _stage(params: Params) -> data.StructLayout:
    """A beat in the loop: where it writes back, and what it carries along."""
    return data.StructLayout({
        "valid": unsigned(1), "rtx": unsigned(1),
        "addr": unsigned(acc_addr_bits(params)),
        "mask": unsigned(params.lanes), "last": unsigned(1), "first": unsigned(1),
        "result": unsigned(1), "nan": unsigned(1), "ovf": unsigned(1),
        "bf16": unsigned(1),
    })


ACC_RAM_FORMS = ("memory", "ecp5", "compact")
"""Build forms of the accumulator loop (:class:`LaneLoop` ``acc_ram``)."""


class LaneLoop(CheckedComponent):
    """2 x S x K/L accumulator beats (with sticky NaN and overflow flags) in
    block RAM, and L lanes (``hdl/lane.py``) between its read and write
    ports.

    Parameters
    ----------
    acc_ram : one of :data:`ACC_RAM_FORMS`
        ``"memory"`` (default): a portable :class:`~netagg.hdl.ram.WideRAM`
        with its output register, one copy of the read address register
        per lane's group of blocks, loaded from the loop's address register
        (read latency 3 from it), and a forwarding path from the write-back
        to the operand register. ``"ecp5"``: the same
        in ECP5 ``DP16KD`` blocks (their own output register; at most 4096
        beats, ``2 x S x K/L <= 4096``), same timing; the slot table's slot
        words and the multicast's RESULT buffer are then in ``DP16KD``
        blocks too, their second read register the blocks' own. ``"compact"``: the
        fewest cells, for small FPGAs at low clocks: a ``Memory`` whose read
        port is transparent to the write-back (read latency 1), no output
        register and no forwarding.
    data_latency : int
        Cycles from a beat's issue to its payload beat on ``data`` (2 to
        :attr:`read_stages` - 1; default 2): the loop delays it to the
        operand register.

    Ports
    -----
    issue : In(stream of loop_beat, always_ready)
        One beat per cycle. A combine beat (``rtx`` low) reads its
        accumulators, combines them with ``data`` in the lanes and writes
        them back ``latency`` cycles later (address register, the RAM read
        registers, the operand register, the lanes). Its operand is the RAM
        entry or, with forwarding, the most recent write-back to its address
        in the cycles the RAM read misses. A beat may issue :attr:`spacing`
        cycles after a combine beat to its address. A retransmitted beat
        (``rtx``) is read out as a RESULT beat, nothing written.
    data : In(payload_beat)
        The payload beat of the beat issued ``data_latency`` cycles before
        (default 2; up to :attr:`read_stages` - 1, 4 unless ``"compact"``),
        as the issue queue's registered payload-buffer read delivers it.
    lanes_busy : Out(1)
        Registered: a combine beat was in the loop in the previous cycle (a
        retransmission waits for ``~lanes_busy``: then the loop holds no
        combine beat that its read could miss).
    res_beat : Out(stream of result_beat, always_ready)
        Registered: a combine beat with ``result`` as it is written back
        (new accumulators and sticky flags), ``latency`` + 1 cycles after
        its issue; a retransmitted beat as read, :attr:`read_stages` + 1
        cycles after its issue.
    busy : Out(1)
        A beat is in the loop or on ``res_beat``.
    """

    @staticmethod
    def check(params: Params, *, fp_stages=None, acc_ram: str = "memory",
              data_latency: int = 2) -> None:
        top_data = LaneLoop.read_stages_of(acc_ram) - 1
        if data_latency not in range(2, top_data + 1) or isinstance(data_latency, bool):
            raise ValueError(f"data_latency must be an int in 2..{top_data}, "
                             f"not {data_latency!r}")
        Lane.check(dtypes=params.dtypes, ops=params.ops,
                   bf16_accumulate=params.bf16_accumulate, stages=fp_stages)
        if acc_ram not in ACC_RAM_FORMS:
            raise ValueError(f"acc_ram must be one of {ACC_RAM_FORMS}, not {acc_ram!r}")
        depth = 2 * params.slots * params.beats
        if acc_ram == "ecp5" and depth > DP16KD_DEPTH:
            raise ValueError(f"acc_ram 'ecp5' holds at most {DP16KD_DEPTH} accumulator beats, "
                             f"not 2 x S x K/L = {depth}")

    def __init__(self, params: Params, *, fp_stages=None, acc_ram: str = "memory",
                 data_latency: int = 2):
        self._params = params
        self._data_latency = data_latency
        self._lane_args = dict(dtypes=params.dtypes, ops=params.ops,
                               bf16_accumulate=params.bf16_accumulate, stages=fp_stages)
        self._lane_latency = Lane.latency_of(fp_stages)
        self._acc_ram = acc_ram
        super().__init__({
            "issue": In(stream.Signature(loop_beat(params), always_ready=True)),
            "data": In(payload_beat(params)),
            "lanes_busy": Out(1),
            "res_beat": Out(stream.Signature(result_beat(params), always_ready=True)),
            "busy": Out(1),
        })

    @staticmethod
    def acc_ram_for(params: Params, family: str, *, blocks: int | None = None) -> str:
        """The accumulator RAM form for a build on ``family`` (``"ecp5"``,
        ``"ice40"``, ...): ``"ecp5"`` on the ECP5 when the accumulators fit
        a ``DP16KD`` configuration's depth (at most 4096 entries) and, given
        the device's ``blocks`` (DP16KD), take at most three quarters of them
        in the widest configuration that holds them
        (:func:`~netagg.hdl.ram.dp16kd_shape`; the rest of the core needs
        some: 22 at the defaults); else ``"memory"``, which a synthesis tool
        maps as it can (e.g. L=32 with S=1024: 4096 entries, 257 DP16KD in
        the 4096 x 4 shape, more than the LFE5U-85F's 208)."""
        depth = 2 * params.slots * params.beats
        fits = depth <= DP16KD_DEPTH
        if fits and blocks is not None:
            width = acc_word(params).size
            fits = 4 * -(-width // dp16kd_shape(depth)[1]) <= 3 * blocks
        return "ecp5" if family == "ecp5" and fits else "memory"

    @staticmethod
    def read_stages_of(acc_ram: str = "memory") -> int:
        """Cycles from a beat's issue to the lanes' input: the address
        register, the RAM's read latency (3 from the address register: each
        lane's group of blocks has its own copy of it; 1 ``"compact"``),
        the operand register."""
        return 3 if acc_ram == "compact" else 5

    @staticmethod
    def latency_of(fp_stages=None, acc_ram: str = "memory") -> int:
        """Cycles from a beat's issue to its write-back."""
        return Lane.latency_of(fp_stages) + LaneLoop.read_stages_of(acc_ram)

    @staticmethod
    def spacing_of(fp_stages=None, acc_ram: str = "memory") -> int:
        """Fewest cycles between the issues of two combine beats to one
        address: lane latency + 1 with forwarding, + 2 ``"compact"``."""
        return Lane.latency_of(fp_stages) + (2 if acc_ram == "compact" else 1)

    @property
    def read_stages(self) -> int:
        return self.read_stages_of(self._acc_ram)

    @property
    def latency(self) -> int:
        return self.latency_of(self._lane_args["stages"], self._acc_ram)

    @property
    def spacing(self) -> int:
        return self.spacing_of(self._lane_args["stages"], self._acc_ram)

    def elaborate(self, platform):
        m = Module()
        p = self._params
        L, B, S = p.lanes, p.beats, p.slots
        D = self._lane_latency
        stage_l = _stage(p)
        word_l = acc_word(p)
        compact = self._acc_ram == "compact"
        R = self.read_stages - 2                  # stages between address and operands

        if compact:
            m.submodules.acc_mem = acc_mem = Memory(shape=word_l, depth=2 * S * B, init=[])
            acc_wr = acc_mem.write_port()
            acc_rd = acc_mem.read_port(transparent_for=(acc_wr,))
            m.d.comb += acc_rd.en.eq(1)
            w_addr, w_data, w_en, r_addr = acc_wr.addr, acc_wr.data, acc_wr.en, acc_rd.addr
            entry = acc_rd.data
        else:
            # one lane's accumulators per group, each with its own address
            # registers (the loop's address stage and write-back address)
            m.submodules.acc_ram = acc_ram = WideRAM(word_l.size, 2 * S * B,
                                                     form=self._acc_ram, out_reg=True,
                                                     group_bits=32)
            m.d.comb += acc_ram.r_en.eq(1)
            w_data = acc_ram.w_data
            entry = word_l(acc_ram.r_data)
        lanes = []
        for i in range(L):
            lane = Lane(**self._lane_args, decoded=not compact)
            m.submodules[f"lane{i}"] = lane
            m.d.comb += lane.o.ready.eq(1)
            lanes.append(lane)

        # Loop stages: address (the RAM read address), R read stages (the
        # last one holds the RAM's entry), operands (the lanes' inputs),
        # then D lane stages; the last one writes back.
        kind_l = data.StructLayout({"dtype": layouts.DType, "op": layouts.Op})
        names = ["at_addr"] + [f"at_read{k}" for k in range(R)] + ["at_operands"]
        front = [Signal(stage_l, name=n) for n in names]
        kinds = [Signal(kind_l, name=f"{n}_kind") for n in names]
        at_addr, at_data, at_operands = front[0], front[-2], front[-1]
        in_lanes = [Signal(stage_l, name=f"in_lane{k}") for k in range(D)]
        stages = front + in_lanes
        out = in_lanes[D - 1]
        m.d.sync += self.lanes_busy.eq(Cat(s.valid & ~s.rtx for s in stages).any())
        beat = self.issue.payload
        m.d.sync += [
            at_addr.valid.eq(self.issue.valid),
            at_addr.rtx.eq(beat.rtx),
            at_addr.addr.eq(beat.addr),
            at_addr.mask.eq(beat.mask),
            at_addr.last.eq(beat.last),
            at_addr.first.eq(beat.first),
            at_addr.result.eq(beat.result),
            at_addr.bf16.eq(beat.bf16),
            kinds[0].dtype.eq(beat.dtype),
            kinds[0].op.eq(beat.op),
        ]
        if compact:
            m.d.comb += r_addr.eq(at_addr.addr)
        else:
            # the groups' own address registers copy at_addr's (read at the
            # next edge): one register drives them, across the lanes
            m.d.comb += acc_ram.r_addr.eq(at_addr.addr)
        for k in range(1, len(front) - 1):
            m.d.sync += [front[k].eq(front[k - 1]), kinds[k].eq(kinds[k - 1])]

        # Write-back with the new sticky flags of the beat. (not compact:
        # the OR of the lanes' flags is registered with the lanes' outputs,
        # from the flags they take next and the mask of the stage before
        # ``out``, so that no bit of the write data is a function of every
        # lane's register)
        if compact:
            lane_nan = (Cat(lane.o.payload.nan for lane in lanes) & out.mask).any()
            lane_ovf = (Cat(lane.o.payload.ovf for lane in lanes) & out.mask).any()
        else:
            lane_nan, lane_ovf = Signal(name="lanes_nan"), Signal(name="lanes_ovf")
            pre_out = stages[-2]
            m.d.sync += [
                lane_nan.eq((Cat(lane.nan_next for lane in lanes) & pre_out.mask).any()),
                lane_ovf.eq((Cat(lane.ovf_next for lane in lanes) & pre_out.mask).any()),
            ]
        written = Signal(word_l)
        m.d.comb += [written.nan.eq((out.nan & ~out.first) | lane_nan),
                     written.ovf.eq((out.ovf & ~out.first) | lane_ovf)]
        for i, lane in enumerate(lanes):
            m.d.comb += written.data[i].eq(lane.o.payload.r)
        writes = out.valid & ~out.rtx
        m.d.comb += w_data.eq(written)
        if compact:
            m.d.comb += [w_addr.eq(out.addr), w_en.eq(writes)]
        else:                                           # registered as out's
            m.d.comb += [acc_ram.w_addr.eq(stages[-2].addr),
                         acc_ram.w_en.eq(stages[-2].valid & ~stages[-2].rtx)]

        # Forwarding: the write-backs the entry at the data stage misses
        # (this cycle's and the two before it, one before ``"compact"``: the
        # RAM read the address at the edge ending the first of these
        # cycles); the most recent wins.
        # Their selects (valid write-back to the data stage's address) are
        # compared two cycles earlier, between the stage two before the
        # data stage and the beats two stages before their write-backs,
        # registered once (``fwd_hit_tree``) and then once per lane (see
        # ``_kept``): the lanes' copies come from one flip-flop each, not
        # from the compare.
        history = [(writes, out.addr, written)]
        if not compact:
            for k in range(1, acc_ram.latency):
                prev = history[-1]
                held = (Signal(name=f"wrote{k}"), Signal.like(out.addr, name=f"wrote{k}_addr"),
                        Signal(word_l, name=f"wrote{k}_word"))
                m.d.sync += [h.eq(v) for h, v in zip(held, prev, strict=True)]
                history.append(held)
            pre2 = front[-4]                    # at_data's beat, two cycles earlier
            # history[k] at the data stage, two cycles earlier: the beats
            # two and one stages before `out`, then `out`'s write-back and
            # the older ones
            early = [(s.valid & ~s.rtx, s.addr) for s in stages[-3:-1]]
            early += [(valid, addr) for valid, addr, _ in history[:-2]]
            hits = _kept(m, Cat(valid & (addr == pre2.addr) for valid, addr in early),
                         "fwd_hit_tree")
        # The lanes' selects, one stage before the lanes: the beat's decode
        # (and the bf16 widening of its elements one stage before that).
        sel_d = decode_sel(kinds[-2].dtype, kinds[-2].op, at_data.first)
        widen_pre = kinds[-3].dtype == DType.BF16

        # Operands, registered: the lanes' inputs. The payload beat arrives
        # at the second stage; the stage delay line follows the lanes.
        acc_in = Signal(word_l)
        payload = self.data
        for k in range(R + 1 - self._data_latency):
            delayed = Signal(payload_beat(p), name=f"payload_d{k}")
            m.d.sync += delayed.eq(payload)
            payload = delayed
        payload_in = Signal(payload_beat(p))
        rtx_out = Signal()       # the operands stage holds a retransmitted beat (not for lanes)
        m.d.sync += [at_operands.eq(at_data), kinds[-1].eq(kinds[-2]),
                     rtx_out.eq(at_data.valid & at_data.rtx)]
        with m.If(at_data.rtx):
            m.d.sync += at_operands.valid.eq(0)
        if compact:
            m.d.sync += [acc_in.eq(entry), payload_in.eq(payload)]
        else:
            # flags: the first lane's copy of the forwarding selects
            flag_hit = _kept(m, hits, "fwd_hit_flags")
            m.d.sync += [acc_in.nan.eq(_forward(entry, history, flag_hit, "nan")),
                         acc_in.ovf.eq(_forward(entry, history, flag_hit, "ovf"))]
        for i, lane in enumerate(lanes):
            m.d.comb += lane.i.valid.eq(at_operands.valid)
            m.d.comb += [lane.i.payload.a.eq(acc_in.data[i]), lane.i.payload.b.eq(payload_in[i])]
            if compact:
                m.d.comb += [lane.i.payload.dtype.eq(kinds[-1].dtype),
                             lane.i.payload.op.eq(kinds[-1].op),
                             lane.i.payload.first.eq(at_operands.first)]
                continue
            sel = Signal(LaneSel, name=f"lane{i}_sel", attrs=KEEP)
            m.d.sync += [sel[k].eq(v) for k, v in sel_d.items()]
            m.d.comb += lane.sel.eq(sel)
            widen = _kept(m, widen_pre, f"lane{i}_widen")
            lane_hit = _kept(m, hits, f"lane{i}_fwd_hit")
            m.d.sync += [payload_in[i].eq(widen_b(payload[i], widen)),
                         acc_in.data[i].eq(_forward(entry, history, lane_hit, "data", i))]
        m.d.sync += [in_lanes[0].eq(at_operands), in_lanes[0].nan.eq(acc_in.nan),
                     in_lanes[0].ovf.eq(acc_in.ovf)]
        for k in range(1, D):
            m.d.sync += in_lanes[k].eq(in_lanes[k - 1])

        # RESULT beats: from the lanes (a completing round) or the operand
        # register (a retransmission, issued only once the lanes are empty).
        # (not compact: the load and its choice are flip-flops, registered a
        # cycle ahead from the stages before ``out`` and ``rtx_out``, so the
        # wide register's enable comes from one flip-flop)
        rb = self.res_beat
        from_lanes_now = out.valid & out.result
        if compact:
            from_lanes, load = from_lanes_now, from_lanes_now | rtx_out
        else:
            from_lanes = Signal(name="res_from_lanes", attrs=KEEP)
            load = Signal(name="res_load", attrs=KEEP)
            ahead = stages[-2].valid & stages[-2].result
            m.d.sync += [from_lanes.eq(ahead), load.eq(ahead | (at_data.valid & at_data.rtx))]
        m.d.sync += rb.valid.eq(load)
        with m.If(load):
            with m.If(from_lanes):
                m.d.sync += [rb.payload.mask.eq(out.mask),
                             rb.payload.nan.eq(written.nan), rb.payload.ovf.eq(written.ovf),
                             rb.payload.last.eq(out.last), rb.payload.bf16.eq(out.bf16),
                             rb.payload.data.eq(written.data)]
            with m.Else():
                m.d.sync += [rb.payload.mask.eq(at_operands.mask),
                             rb.payload.nan.eq(acc_in.nan), rb.payload.ovf.eq(acc_in.ovf),
                             rb.payload.last.eq(at_operands.last),
                             rb.payload.bf16.eq(at_operands.bf16),
                             rb.payload.data.eq(acc_in.data)]

        m.d.comb += self.busy.eq(rtx_out | rb.valid | Cat(s.valid for s in stages).any())
        return m
