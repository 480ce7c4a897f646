"""A cycle-level simulator of a wafer's mesh of processing elements (PEs), to run mappings as
the wafer would and check primitives/mesh.py's closed forms against that execution.

State is arrays over PEs, links and colors, advanced a cycle at a time while words move
(fabric.py) and skipped ahead while they do not:

- PEs (machine.py): a compute engine each, running an SPMD program (compute, send, receive,
  stream-through, wait, barrier) one operation at a time, with an SRAM capacity the
  program's buffers are checked against;
- routers (routes.py): per color (virtual channel) one set of input ports and one set of
  output ports, as a WSE router holds its routes, a fixed number of colors (24);
- links (fabric.py): a 32-bit word per cycle per direction (and per ramp between a PE and
  its router), `hop_cycles` per hop, buffers and back-pressure, a color carrying one
  stream at a time on each link.

Every rate, latency and capacity is the wafer spec's (hardware.py: backends.numbers with the
knob overrides, and routing_colors); what no spec gives is named there and marked ASSUMED.
Mappings (gemv.py, gemm.py, kv.py, collectives.py) compute on real data, checked against
numpy exactly; compare.py sets simulated cycles beside the closed forms; pictures.py draws
where a run's PEs and links were idle.

    from workbench.simulate import run, where_idle
    r = run("gemv", "mesh", P=64, k=768, n=1152, hardware="wse3")
    r.cycles, r.correct
    where_idle(r)
"""
from .compare import kv_capacity, model_cycles, sweep
from .hardware import SimNumbers, sim_numbers
from .machine import Program, SimResult, simulate
from .pictures import busy_heatmap, link_map, where_idle
from .routes import DoesNotFit, SimulationError
from .run import KERNELS, layer_shapes, program, run, sram_bytes

__all__ = ["KERNELS", "DoesNotFit", "Program", "SimNumbers", "SimResult", "SimulationError", "busy_heatmap",
           "kv_capacity", "layer_shapes", "link_map", "model_cycles", "program", "run", "sim_numbers", "simulate",
           "sram_bytes", "sweep", "where_idle"]
