"""``vllm.utils.network_utils`` of the stand-in."""


def get_ip() -> str:
    return "127.0.0.1"
