"""Package data of mambazip, installed as ``mambazip.models``: the presets (``*.json``) and
the priors (``priors/SHA.safetensors`` with their manifests). A regular package rather than a
namespace one, so that ``importlib.resources.files`` gives the folder as a concrete path
(a ``pathlib.Path`` for an install on disk) on every Python the project admits, never a
``MultiplexedPath`` whose API differs between Python versions."""
