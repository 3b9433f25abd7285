"""scikit-learn's digits pipeline (RBM features + logistic regression) with shortrun's RBM:
the scikit-learn code as it is, only the RBM's import changed.

Run: python examples/sklearn_digits.py [--steps N]   (N: the RBM's n_iter; default 10)
"""

import argparse

from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import minmax_scale

from shortrun.sklearn import BernoulliRBM  # was: from sklearn.neural_network import ...

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()

# --- the user code --------------------------------------------------------------------------
X, y = load_digits(return_X_y=True)
X = minmax_scale(X, feature_range=(0, 1))  # pixels as probabilities in [0, 1]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)

rbm = BernoulliRBM(n_components=100, learning_rate=0.06, n_iter=args.steps, random_state=0)
logistic = LogisticRegression(C=6000, max_iter=10_000)
model = Pipeline(steps=[("rbm", rbm), ("logistic", logistic)])
model.fit(X_train, y_train)
accuracy = model.score(X_test, y_test)
# ---------------------------------------------------------------------------------------------

print(f"test accuracy of RBM features + logistic regression: {accuracy:.3f}")
assert rbm.components_.shape == (100, 64) and accuracy > 0.5
