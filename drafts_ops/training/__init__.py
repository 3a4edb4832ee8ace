"""Training the neural models (``drafts train``; needs the ``train`` extra, PyTorch): the
examples harvested from the search itself, the networks, the training loops and the
model card's training sections. Nothing here is imported by a search."""
