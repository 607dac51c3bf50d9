# A user's own sitecustomize: it must still run under ltd's automatic
# heartbeats, which put their own sitecustomize first on PYTHONPATH.
import os

os.environ["USER_SITECUSTOMIZE_RAN"] = "1"
