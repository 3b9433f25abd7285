"""GridSearchCV over shortrun's BernoulliRBM inside a scikit-learn pipeline: the RBM's
n_components and learning_rate chosen by cross-validated accuracy.

Run: python examples/sklearn_grid_search.py [--steps N]   (N: the RBM's n_iter; default 5)
"""

import argparse

from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import minmax_scale

from shortrun.sklearn import BernoulliRBM

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=5)
args = ap.parse_args()

# --- the user code --------------------------------------------------------------------------
X, y = load_digits(return_X_y=True)
X = minmax_scale(X[:600])  # a subset keeps the search quick
y = y[:600]
pipe = Pipeline([("rbm", BernoulliRBM(n_iter=args.steps, random_state=0)),
                 ("logistic", LogisticRegression(C=100, max_iter=2_000))])
grid = {"rbm__n_components": [32, 64], "rbm__learning_rate": [0.02, 0.06]}
search = GridSearchCV(pipe, grid, cv=3).fit(X, y)
# ---------------------------------------------------------------------------------------------

print(f"best {search.best_params_}: cross-validated accuracy {search.best_score_:.3f}")
assert set(search.best_params_) == set(grid) and 0 < search.best_score_ <= 1
