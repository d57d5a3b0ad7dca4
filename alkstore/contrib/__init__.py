"""Integrations with frameworks (optional extras): ``alkstore.contrib.django``."""
