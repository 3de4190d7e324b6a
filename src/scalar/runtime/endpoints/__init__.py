"""Serverless endpoints over the control plane (docs/endpoints.md): the endpoint service, its
tick, local handler workers and the RunPod export."""
