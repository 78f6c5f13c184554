from t3.workload.models import ModelSpec, get_model, model_names
from t3.workload.sublayers import SUBLAYERS, Operator, sublayer_operator

__all__ = ["ModelSpec", "get_model", "model_names", "SUBLAYERS", "Operator", "sublayer_operator"]
