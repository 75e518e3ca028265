from vllm.platforms.cpu import CpuPlatform


class RayCpuPlatform(CpuPlatform):
    ray_device_key = "GPU"  # one Ray "GPU" per worker: the nodes are started with --num-gpus=1
