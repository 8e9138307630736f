"""gpuloans-agent: samples the GPUs of one server and posts them to gpuloans (agent protocol v1).

Imports nothing from the web application; installs on its own with the `agent` extra.
"""

__version__ = "0.1.0"
