"""The step of a closed-loop simulation that both discrete-event simulations share
(test_concurrency_simulation.py for GPU engines, test_wafer_serving.py for a pipelined
wafer): every decoding request gains its token, plus under speculative decoding the drafted
ones up to the first rejection (each accepted with probability `acceptance`, a Monte Carlo
of the acceptance process), never past its output length; a finished request is recorded
and its client sends the next one at a uniformly random moment of the next step (the round
trip)."""
from __future__ import annotations


def decode_step(decoding, *, end_s, step_s, rng, done, pending, draft_len=0, acceptance=0.0, advance=True):
    """The requests still decoding after a step ending at `end_s` and lasting `step_s`
    (each request [arrival, first token time, tokens out, output length]); finished ones go
    to `done` as (arrival, first token, end, output length), their successors' arrival
    times to `pending`. `advance` False: the step ran no decode (a prefill batch alone)."""
    still = []
    for d in decoding:
        if advance:
            accepted = 0
            while accepted < draft_len and rng.uniform() < acceptance:
                accepted += 1
            d[2] = min(d[2] + 1 + accepted, d[3])
        if d[2] >= d[3]:
            done.append((d[0], d[1], end_s, d[3]))
            pending.append(end_s + rng.uniform(0.0, step_s))  # the client's next request
        else:
            still.append(d)
    return still
