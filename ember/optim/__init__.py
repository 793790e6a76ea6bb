"""``ember.optim``: optimizers and learning-rate schedulers with torch.optim's API and updates."""

from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.adadelta import Adadelta
from ember.optim.adagrad import Adagrad
from ember.optim.adam import Adam, AdamW
from ember.optim.adamax import Adamax
from ember.optim.asgd import ASGD
from ember.optim.lbfgs import LBFGS
from ember.optim.nadam import NAdam
from ember.optim.optimizer import Optimizer
from ember.optim.radam import RAdam
from ember.optim.rmsprop import RMSprop
from ember.optim.rprop import Rprop
from ember.optim.sgd import SGD

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "Rprop", "SGD", "lr_scheduler"]
