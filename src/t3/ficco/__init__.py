"""FiCCO: the schedule design space, loss accounting, heuristic selector and scenario set."""

from t3.ficco.space import Axes, FiccoOperator, enumerate_space, parse_name

__all__ = ["Axes", "FiccoOperator", "enumerate_space", "parse_name"]
