"""Analysis of sweep Datasets: Pareto frontiers, scaling exponents and regime crossovers,
and where the time goes (bottleneck shares). Pure functions of an xr.Dataset, vectorized
over its dimensions."""
from .bottleneck import bottleneck
from .pareto import pareto
from .scaling import crossover_where, crossovers, scaling

__all__ = ["pareto", "scaling", "crossovers", "crossover_where", "bottleneck"]
