from t3.sim.engine import DeadlockError, Engine, Result
from t3.sim.schedule import Op, Policy, Resource, Schedule, ScheduleBuilder

__all__ = ["DeadlockError", "Engine", "Result", "Op", "Policy", "Resource", "Schedule", "ScheduleBuilder"]
