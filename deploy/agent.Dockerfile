# The agent's image for the DaemonSet: docker build -f deploy/agent.Dockerfile -t gpuloans-agent .
# NVML comes from the host's driver through the NVIDIA container runtime at run time.
FROM python:3.11-slim
# The agent's own distribution (agent/pyproject.toml): none of the server comes with it.
COPY agent /src/agent
RUN pip install --no-cache-dir '/src/agent[kubelet]' && rm -rf /src
USER 0
ENTRYPOINT ["gpuloans-agent"]
