"""Analysis of sweep Datasets: Pareto frontiers, scaling exponents and regime crossovers,
where the time goes (bottleneck shares), and the sensitivity of any prediction to the
hardware knobs (elasticities) and the knob value a target needs (requirements). Pure functions of an xr.Dataset, vectorized
over its dimensions."""
from .bottleneck import bottleneck
from .pareto import pareto
from .requirement import requirement
from .scaling import crossover_where, crossovers, scaling
from .sensitivity import sensitivity

__all__ = ["pareto", "scaling", "crossovers", "crossover_where", "bottleneck", "sensitivity", "requirement"]
