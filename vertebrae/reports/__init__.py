"""Report renderers: Markdown (``markdown``) and figures (``figures``); JSON reports are the result objects' ``to_dict``."""
