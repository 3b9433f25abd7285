"""The speed wing: everything that chooses or implements a faster route (docs/architecture.md,
"Routes chosen by measurement"). :mod:`~shortrun.speed.engine` runs every family; this file
imports nothing, so an energy may import one family without the others.
"""
