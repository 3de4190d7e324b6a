"""Drives the engine and the domain in virtual time: trace readers, protocols, metrics, baselines."""
