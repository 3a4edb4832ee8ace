"""Surveys: the files of a directory searched once each, their ledger, the beams of a
multi-beam receiver matched against each other, and the survey's page."""
