"""Measuring the search and the models on held-out simulated data (``drafts evaluate``) and
on your own data with injected bursts (``drafts inject``)."""
