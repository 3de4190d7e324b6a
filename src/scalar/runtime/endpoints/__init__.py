"""Serverless endpoints over the control plane (issue 7, docs/endpoints.md): the endpoint service, its
tick, local handler workers and the RunPod export."""
