"""A small Django project for the backend's tests: settings, a shop app, a view."""
