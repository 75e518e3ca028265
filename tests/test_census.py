"""``xpu-workarounds census``: vLLM's own inline XPU workarounds, found in a release's source.

Small source trees written here hold the edge cases (what counts and what does not, a site
that moved, a reference in a string, a comment over several lines, a platform check with no
workaround); the census of real vLLM releases is in tests/test_census_releases.py, and a
release pip cannot fetch (exit 4) in tests/test_check.py, beside check's. Nothing is downloaded here.
"""

from __future__ import annotations

import json
import re
import textwrap
import zipfile
from pathlib import Path

import pytest
from support import terminal
from support.manifests import write_manifest
from support.package_index import VERSION, pip_environment
from support.packages import sdist_bytes
from typer.testing import CliRunner

from tracker.census import scan, wording
from tracker.census.count import compare
from tracker.commands.app import app
from tracker.model import reader
from tracker.release.census import census_tree

XPU_PINS = "torch==2.15.0+xpu\nvllm-xpu-kernels==0.1.17\n"
STATIC_LAUNCHER = {"id": "vllm-static-launcher-off", "title": "vLLM switches the static launcher off",
                   "file": "vllm/platforms/xpu.py", "marker": '"use_static_cuda_launcher", False',
                   "carried_in": ">=0.28.0", "waits_on": "pytorch/pytorch#188240", "dead_when": "torch>=2.14.0"}
PP_SYNC = {"id": "vllm-pp-broadcast-sync", "title": "vLLM synchronizes the main stream before the broadcast",
           "file": "vllm/v1/worker/gpu/pp_utils.py", "marker": "self.main_stream.synchronize()",
           "carried_in": ">=0.25.0"}
EVENT_KEYWORDS = {"id": "vllm-xpu-event-keywords", "title": "vLLM drops the Event keywords",
                  "file": "vllm/v1/worker/xpu_model_runner.py", "marker": "def _xpu_event(",
                  "carried_in": ">=0.25.0", "waits_on": "pytorch/pytorch#192495", "dead_when": "torch>=2.15.0",
                  "remaining": "torch.xpu.Event in torch 2.15.0 still rejects the external keyword"}


def sites_of(source: str, file: str = "vllm/model_executor/layers/example.py") -> list[scan.Site]:
    return scan.scan_source(file, textwrap.dedent(source)).sites


def spans(source: str, file: str = "vllm/model_executor/layers/example.py") -> list[tuple[int, int]]:
    return [(site.line, site.end_line) for site in sites_of(source, file)]


def write_tree(root: Path, files: dict[str, str], version: str = "0.99.0", pins: str | None = XPU_PINS) -> Path:
    (root / "vllm").mkdir(parents=True, exist_ok=True)
    (root / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    if pins is not None:
        (root / "requirements").mkdir(exist_ok=True)
        (root / "requirements" / "xpu.txt").write_text(pins)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def manifest_with(tmp_path: Path, *tracked: dict[str, str]) -> Path:
    return write_manifest(tmp_path / "workarounds.toml", tracked=list(tracked))


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_MANIFEST": None})


PLATFORM = '''\
class XPUPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        compilation_config = vllm_config.compilation_config

        # UVA-offloaded weights are host USM allocations, which Inductor's
        # static Triton launcher rejects. Remove once the released torch
        # contains pytorch/pytorch#188240.
        if uva_offloading:
            compilation_config.inductor_compile_config.setdefault(
                "use_static_cuda_launcher", False
            )

        # spawn is the only supported multiprocessing method on XPU
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
'''
PP_UTILS = '''\
from vllm.platforms import current_platform


class PPHandler:
    def broadcast(self, sampled_token_ids):
        self.sampled_tokens_broadcast = True

        if current_platform.is_xpu():
            self.main_stream.synchronize()

        with torch.cuda.stream(self.broadcast_stream):
            self.broadcast_stream.wait_stream(self.main_stream)
'''


# ------------------------------------------------------------------ what counts


def test_a_comment_above_a_platform_check_makes_a_site_of_the_comment_and_its_branch():
    source = '''\
    def view(cpu_tensor):
        # Remove once the kernels fix for empty inputs
        # (vllm-project/vllm-xpu-kernels#513) is in a released package.
        if current_platform.is_xpu():
            return torch.empty(cpu_tensor.shape, device="xpu")

        return cpu_tensor
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line) == (2, 5)
    assert site.references == ("vllm-project/vllm-xpu-kernels#513",)
    assert site.summary == ("Remove once the kernels fix for empty inputs (vllm-project/vllm-xpu-kernels#513) is "
                            "in a released package.")


def test_a_comment_heading_a_platform_check_s_branch_stands_for_the_whole_branch():
    source = '''\
    def view(cpu_tensor):
        if current_platform.is_xpu():
            # Workaround: the XPU view rejects non-pinned input.
            pinned = cpu_tensor.pin_memory()

            return xpu_view(pinned)
        elif current_platform.is_cuda_alike():
            return cuda_view(cpu_tensor)
    '''
    assert spans(source) == [(2, 6)]


def test_a_multi_line_comment_is_one_site_with_its_sentence_as_summary():
    source = '''\
    if current_platform.is_xpu():
        # The side stream is not ordered after the sampler here,
        # and the broadcast reads stale tokens: a known issue of
        # the XPU stream ordering. Synchronize first.
        main_stream.synchronize()
        side_stream.wait_stream(main_stream)
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line) == (1, 6)
    assert site.summary.startswith("The side stream is not ordered after the sampler here, and the broadcast reads "
                                   "stale tokens: a known issue of the XPU stream ordering.")


def test_a_platform_check_with_no_workaround_is_not_a_site():
    source = '''\
    def select(device, backend):
        # Pick the kernel for this device.
        if current_platform.is_xpu():
            return XPUExperts
        if device.type == "xpu":
            return "vllm.v1.worker.xpu_worker.XPUWorker"
        return {PlatformEnum.XPU: xpu_kernel, PlatformEnum.CUDA: cuda_kernel}[backend]

    class RMSNorm:
        def forward_xpu(self, x):
            # Fused kernel.
            return ops.rms_norm(x)
    '''
    assert spans(source) == []


def test_xpu_only_modules_count_as_platform_checks_but_their_plain_comments_do_not():
    assert spans(PLATFORM, "vllm/platforms/xpu.py") == [(6, 12)]
    assert spans(PLATFORM, "vllm/platforms/cuda.py") == [(6, 12)]  # in class XPUPlatform
    assert spans(PLATFORM.replace("XPUPlatform", "CudaPlatform"), "vllm/platforms/cuda.py") == []
    assert scan.is_xpu_module("vllm/device_allocator/xpumem.py")
    assert scan.is_xpu_module("vllm/models/deepseek_v4/xpu/model.py")
    assert not scan.is_xpu_module("vllm/platforms/cuda.py")


def test_a_reference_in_a_logged_string_makes_a_site_of_the_branch_that_logs_it():
    source = '''\
    if current_platform.is_xpu():
        compilation_config.pass_config.fuse_gemm_comms = False
        logger.warning(
            "Async TP is off on XPU until pytorch/pytorch#170500 is released."
        )
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line) == (1, 5)  # the log line and the switch it explains are one site
    assert site.references == ("pytorch/pytorch#170500",)
    assert site.kind == "switch-off"


def test_strings_split_over_lines_are_read_as_one():
    source = '''\
    if current_platform.is_xpu():
        logger.warning(
            "The prefix-LM mask cannot be applied for now, so image inputs "
            "are run without it on XPU."
        )
    '''
    (site,) = sites_of(source)
    assert site.summary == ("The prefix-LM mask cannot be applied for now, so image inputs are run without it "
                            "on XPU.")


def test_a_message_warning_of_a_defect_the_user_chose_is_no_workaround():
    source = '''\
    if current_platform.is_xpu():
        if selected_backend == FLASH_ATTN:
            logger.warning_once(
                "Using Flash Attention on XPU because it was explicitly requested. Image inputs "
                "will produce incorrect results; only use this for text-only workloads."
            )
            return FLASH_ATTN
    '''
    assert spans(source) == []


def test_a_refusal_on_xpu_that_names_the_gap_is_a_site_of_its_branch():
    source = '''\
    def quantize(x, symmetric):
        if current_platform.is_xpu():
            if not symmetric:
                raise NotImplementedError("asymmetric quantization is not supported on XPU")
        return quantize_cuda(x)
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line, site.kind) == (2, 4, "refusal")


def test_a_refusal_that_names_no_gap_or_validates_a_value_is_no_site():
    source = '''\
    if current_platform.is_xpu():
        assert dtype != torch.float32, "float32 is buggy on XPU"
    if current_platform.is_xpu():
        raise ValueError(f"Unsupported backend for XPU: {backend}")
    '''
    assert spans(source) == []


def test_a_refusal_in_an_xpu_module_is_its_own_validation_unless_it_names_a_known_issue():
    source = '''\
    class XPUPlatform:
        def check_dtype(cls, dtype):
            if head_size % 64:
                raise ValueError("XPU attention only supports head sizes divisible by 64")
            if dtype == torch.bfloat16 and cls.is_a770():
                raise ValueError("Intel Arc A770 has a bfloat16 accuracy known issue.")
    '''
    assert [(site.line, site.end_line, site.kind) for site in sites_of(source, "vllm/platforms/xpu.py")] == [
        (5, 6, "refusal")]


def test_a_missing_feature_is_a_workaround_in_a_comment_and_in_a_logged_fallback():
    source = '''\
    if current_platform.is_xpu():
        # uneven reduce_scatter is not supported here: pad every chunk.
        padded = pad(chunks)

    if current_platform.is_xpu():
        logger.warning("Flash Attention on XPU does not support float32. Falling back to Triton.")
        return TRITON
    '''
    assert [(site.line, site.end_line, site.kind) for site in sites_of(source)] == [
        (1, 3, "substitute"), (5, 7, "fallback")]


def test_a_todo_alone_is_a_plan_not_a_workaround():
    source = '''\
    if current_platform.is_xpu():
        # TODO: fuse these kernels
        out = first(x)
        # TODO(torch>=2.14): write the tensors directly once torch 2.14 is the minimum.
        out = second(out)
    '''
    (site,) = sites_of(source)
    assert (site.line, site.references) == (4, ("torch>=2.14",))


def test_a_negated_check_makes_the_else_branch_xpu_only_code():
    source = '''\
    if not current_platform.is_xpu():
        # A workaround for CUDA graphs, not XPU's.
        capture()
    else:
        # Work around the oneCCL hang at shutdown.
        shutdown_timeout = 5
    '''
    assert spans(source) == [(5, 6)]


def test_a_comment_after_code_annotates_its_statement():
    source = '''\
    if current_platform.is_xpu():
        npid = 1  # see https://github.com/intel/intel-xpu-backend-for-triton/issues/8121
        tiles = 64
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line, site.references) == (2, 2, ("intel/intel-xpu-backend-for-triton#8121",))


def test_a_note_naming_xpu_and_an_issue_counts_in_generic_code():
    source = '''\
    def kernel(
        IS_3D: tl.constexpr,
        # Parameters below default to None: a perf regression source in
        # intel/intel-xpu-backend-for-triton#6758.
        segm_output_ptr=None,
        # The CUDA path is fine with pytorch/pytorch#1 and so is this.
        segm_max_ptr=None,
    ):
        pass
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line) == (3, 5)


def test_a_docstring_paragraph_is_a_site_of_its_own_lines():
    source = '''\
    class DescriptorBuffers:
        def add_copies(self, first):
            """Store a batch of copies.

            Whole batches go in at once because storing one number costs microseconds.

            TODO(torch>=2.14): drop these numpy aliases. They exist only because torch's
            setitem rejects XPU USM addresses >= 2**63 before 2.14 (pytorch#191458).
            """
            self.src_np[first] = 1
    '''
    (site,) = sites_of(source, "vllm/distributed/buffers.py")
    assert (site.line, site.end_line) == (7, 8)
    assert site.references == ("torch>=2.14", "pytorch/pytorch#191458")


def test_the_paragraphs_of_one_docstring_are_one_site():
    source = '''\
    class XPULinearMethod:
        """XPU linear method for w4a16.

        Note: asymmetric quantization is not supported for now.

        Remove once the wNa16 kernel takes this layout.
        """
    '''
    assert spans(source) == [(4, 6)]


def test_a_comment_above_a_function_takes_only_its_header():
    source = '''\
    def wrapper():
        # torch.xpu.Event does not accept the blocking kwarg, so drop it here.
        def _xpu_event(*args, blocking=None, **kwargs):
            return torch.xpu.Event(*args, **kwargs)

        torch.cuda.Event = _xpu_event
    '''
    assert spans(source, "vllm/v1/worker/xpu_model_runner.py") == [(2, 3)]


def test_a_file_that_does_not_parse_or_never_says_xpu_has_no_site():
    assert sites_of("if current_platform.is_xpu(:\n    # workaround\n    x = 1\n") == []
    assert sites_of("if is_cuda():\n    # workaround for a bug\n    x = 1\n") == []


def test_references_are_written_one_way():
    text = ("see https://github.com/intel/intel-xpu-backend-for-triton/issues/8121 and pytorch#191458, "
            "vllm-project/vllm#1 (https://github.com/vllm-project/vllm/pull/2#issuecomment-3), "
            "https://openucx.readthedocs.io/en/master/faq.html. TODO(torch >= 2.14) not #5 or a/b#0")
    assert wording.references(text) == [
        "intel/intel-xpu-backend-for-triton#8121", "pytorch/pytorch#191458", "vllm-project/vllm#1", "vllm-project/vllm#2",
        "https://openucx.readthedocs.io/en/master/faq.html", "torch>=2.14"]


def test_the_words_of_a_temporary_measure_are_told_from_those_of_a_wait():
    assert wording.says_workaround("keep the pool until the fix lands upstream")
    assert wording.says_workaround("use all_gather instead for now")
    assert not wording.says_workaround("wait until the stream is done")
    assert not wording.says_workaround("loop until every block is read")
    assert not wording.says_workaround("see https://docs.example.com/xpu for the variable")
    assert not wording.says_workaround("debugging output")


# ------------------------------------------------------------------ every shape, one site each, with its reference


def only_site(source: str, file: str = "vllm/model_executor/layers/example.py") -> scan.Site:
    found = sites_of(source, file)
    assert len(found) == 1, [(site.where, site.summary) for site in found]
    return found[0]


def test_every_way_of_writing_a_reference_is_written_owner_repo_number():
    text = ("torch-xpu-ops#1791; see pytorch issue #150001, torch-xpu-ops issue 2034, the vllm PR #22945 "
            "and pytorch/pytorch issue 7 (not the issue 5, nor torch 2.8 issues 3 times)")
    assert wording.references(text) == ["intel/torch-xpu-ops#1791", "pytorch/pytorch#150001",
                                        "intel/torch-xpu-ops#2034", "vllm-project/vllm#22945", "pytorch/pytorch#7"]


def test_a_site_naming_the_short_form_of_the_xpu_upstream_has_its_reference():
    site = only_site('''\
    if current_platform.is_xpu():
        # Remove when torch-xpu-ops#1791 is in the pinned torch.
        out = out.contiguous()
    ''')
    assert (site.line, site.end_line, site.references) == (1, 3, ("intel/torch-xpu-ops#1791",))


def test_a_comment_above_a_ternary_on_the_platform_makes_one_site():
    site = only_site('''\
    def pointers(self):
        # XPU addresses can have the high bit set: pytorch issue #191458.
        dtype = torch.uint64 if current_platform.is_xpu() else torch.int64
        return torch.empty(8, dtype=dtype)
    ''')
    assert (site.line, site.end_line, site.references) == (2, 4, ("pytorch/pytorch#191458",))


def test_the_code_after_a_guard_clause_is_xpu_only():
    site = only_site('''\
    def shutdown(config):
        if not current_platform.is_xpu():
            return

        # Without a timeout the next start hangs in CCL init (torch-xpu-ops issue 2034).
        config.shutdown_timeout = 5
    ''')
    assert (site.line, site.end_line, site.references) == (2, 6, ("intel/torch-xpu-ops#2034",))


def test_a_blank_line_between_the_comment_and_the_check_does_not_part_them():
    site = only_site('''\
    def launch(config):
        # Work around pytorch/pytorch#188240: the static launcher rejects host memory.

        if current_platform.is_xpu():
            config.use_static_cuda_launcher = False

        return config
    ''')
    assert (site.line, site.end_line, site.references) == (2, 5, ("pytorch/pytorch#188240",))


def test_a_case_of_a_match_on_the_platform_is_an_xpu_branch():
    site = only_site('''\
    def tiles(device):
        match device.type:
            case "cuda":
                return 8192
            case "xpu":
                # Large tiles lose precision on XPU (torch-xpu-ops#1790).
                return 4096
    ''')
    assert (site.line, site.end_line, site.references) == (5, 7, ("intel/torch-xpu-ops#1790",))


def test_a_comment_after_the_last_statement_of_the_xpu_branch_is_part_of_it():
    site = only_site('''\
    def gather(x):
        if current_platform.is_xpu():
            out = all_gather(x)
            # gather hangs under a Ray cluster: all_gather for now (vllm-project/vllm#123).
        else:
            out = gather(x)
        return out
    ''')
    assert (site.line, site.end_line, site.references) == (2, 4, ("vllm-project/vllm#123",))



def test_a_plain_note_on_a_step_of_xpu_only_code_does_not_end_the_workaround_it_follows():
    """In an XPU module the comment naming what the rest of the function does stands for all of it:
    "# Allocate output tensor." below it names a step; a note that explains something of its own, a
    blank line, or generic code end it as before."""
    module = '''\
    class XpuCommunicator:
        def gather(self, input_, dst=0):
            # For xpu path, gather doesn't work properly together with ray
            # cluster so we use all_gather instead for now.
            input_size = input_.size()
            # Allocate output tensor.
            output_tensor = torch.empty((self.world_size,) + input_size)
            # All-gather.
            dist.all_gather_into_tensor(output_tensor, input_)
            return output_tensor
    '''
    file = "vllm/distributed/device_communicators/xpu_communicator.py"
    assert spans(module, file) == [(3, 10)]
    assert spans(module.replace("# All-gather.", "# XPU lacks all_gather_into_tensor's async form."), file) == [
        (3, 7), (8, 10)]
    assert spans(module.replace("            # Allocate", "\n            # Allocate"), file) == [(3, 5)]
    assert spans(module.replace("class XpuCommunicator", "class Communicator").replace("For xpu path", "On XPU"),
                 "vllm/distributed/communicator.py") == [(3, 5)]


def test_a_neutral_name_for_the_platform_check_is_a_platform_check():
    site = only_site('''\
    def rope(self, positions, query, key):
        use_native = current_platform.is_xpu()
        out = None
        if use_native:
            # W/A: forward_xpu passes an argument the override rejects (pytorch#150001).
            out = self.forward_native(positions, query, key)
        return out
    ''')
    assert (site.line, site.end_line, site.references) == (4, 6, ("pytorch/pytorch#150001",))
    assert site.summary.startswith("W/A:")


def test_a_known_limitation_of_xpu_is_a_workaround():
    site = only_site('''\
    if current_platform.is_xpu():
        # Known XPU limitation: no uneven reduce-scatter (torch-xpu-ops#1700). Pad every chunk.
        padded = pad(chunks)
    ''')
    assert (site.line, site.end_line, site.references) == (1, 3, ("intel/torch-xpu-ops#1700",))


def test_a_comment_after_the_platform_check_on_its_line_stands_for_its_branch():
    site = only_site('''\
    def view(cpu_tensor):
        if current_platform.is_xpu():  # vllm-xpu-kernels#513: pin first until the fix is released
            pinned = cpu_tensor.pin_memory()
            return xpu_view(pinned)
        return cuda_view(cpu_tensor)
    ''')
    assert (site.line, site.end_line, site.references) == (2, 4, ("vllm-project/vllm-xpu-kernels#513",))


def test_a_comment_an_import_a_blank_line_its_code_and_the_warning_it_logs_are_one_site():
    site = only_site('''\
    class XPUPlatform:
        def check_and_update_config(cls, config):
            # Disable fusion passes not yet supported on XPU.
            from vllm.config.compilation import CompilationMode

            passes = {"fuse_allreduce_rms": "AllReduce + RMSNorm fusion"}
            if config.mode != CompilationMode.NONE:
                for flag, name in passes.items():
                    if getattr(config, flag):
                        logger.warning_once("Feature %r is not yet supported on XPU and will be disabled.", name)
                        setattr(config, flag, False)

            # spawn is the only multiprocessing method here
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    ''', "vllm/platforms/xpu.py")
    assert (site.line, site.end_line, site.summary) == (3, 11, "Disable fusion passes not yet supported on XPU.")


def test_xpu_only_code_that_rebinds_a_library_is_one_site_per_function():
    source = '''\
    import torch
    from vllm.platforms.xpu import XPUPlatform


    def get_mem_info_wrapper(device=None):
        return torch.ops._C_cache_ops.getMemoryInfo(device)


    torch.accelerator.get_memory_info = get_mem_info_wrapper
    XPUPlatform.dist_backend = "xccl"


    def _torch_cuda_wrapper():
        # Replace cuda APIs with xpu APIs.
        torch.cuda.Stream = torch.xpu.Stream
        torch.cuda.current_stream = torch.xpu.current_stream

        # torch.xpu.Event does not accept the blocking kwarg, so drop it here.
        def _xpu_event(*args, blocking=None, **kwargs):
            return torch.xpu.Event(*args, **kwargs)

        torch.cuda.Event = _xpu_event
        if supports_xpu_graph():
            setattr(torch.cuda, "graph", torch.xpu.graph)
        yield
    '''
    found = sites_of(source, "vllm/v1/worker/xpu_model_runner.py")
    # The wrapper defined for the rebinding is the substitute: one site with it.
    assert [(site.line, site.end_line) for site in found] == [(5, 9), (14, 24)]
    assert {site.kind for site in found} == {"monkey-patch"}
    assert found[0].summary == "(no comment) rebinds torch.accelerator.get_memory_info"
    assert found[1].summary == "torch.xpu.Event does not accept the blocking kwarg, so drop it here."
    # In a module that is not XPU's, only the rebinding under a platform check is XPU-only code
    # (and the comment that names what torch.xpu lacks is a site of its own).
    elsewhere = sites_of(source, "vllm/v1/worker/cpu_model_runner.py")
    assert [(site.line, site.end_line) for site in elsewhere] == [(18, 19), (24, 24)]
    assert elsewhere[1].summary == "(no comment) rebinds torch.cuda.graph"


def test_a_note_in_generic_code_naming_what_xpu_gets_wrong_counts():
    site = only_site('''\
    def save(src, block_ids):
        # Device addresses can have the high bit set (XPU USM), so they are added
        # up in uint64; signed arithmetic rejects them.
        src_base = np.uint64(src.data_ptr())
        dst_base = region.data_ptr()

        return src_base, dst_base
    ''')
    assert (site.line, site.end_line) == (2, 5)


def test_what_is_xpu_specific_but_no_workaround_is_not_a_site():
    source = '''\
    def backends():
        if current_platform.is_cuda():
            available = [CUDA]
        elif current_platform.is_xpu():
            # XPUExperts does not support batch invariance; TRITON is kept as a fallback.
            available = [Backend.XPU, Backend.TRITON]
        return available


    def communicator(config):
        # torch_nccl is avoided: batched isend/irecv hangs under load (pytorch/pytorch#174288).
        from vllm.distributed.nixl_utils import is_nixl_available

        if current_platform.is_xpu():
            # On XPU, use the device-native XCCL backend.
            config.communicator = "torch_xccl"
        elif is_nixl_available():
            config.communicator = "nixl"


    class Builder:
        # FA2 graphs do not work for mixed prefill-decode; for now use UNIFORM_BATCH (vllm-project/vllm#22945).
        support = ALWAYS if version in (3, 4) or current_platform.is_xpu() else UNIFORM_BATCH
    '''
    assert spans(source) == []


# ------------------------------------------------------------------ what the code does: kinds, confidence


def test_a_flag_set_off_on_xpu_for_a_missing_capability_is_a_switch_off():
    (site,) = sites_of('''\
    class DeepseekV4Model:
        def __init__(self, config):
            self.eps = config.eps

            # Disable aux streams on XPU: no multi-stream overlap support.
            aux_stream_list = None
    ''', "vllm/models/deepseek_v4/xpu/model.py")
    assert (site.line, site.end_line, site.kind) == (5, 6, "switch-off")


def test_a_cast_for_what_the_xpu_kernel_expects_is_a_substitute_even_in_generic_code():
    (site,) = sites_of('''\
    def sample(logits, k):
        # The XPU kernel expects k as int64, but the batch stores it as int32.
        if k is not None:
            k = k.to(torch.int64)

        return xpu_sample(logits, k)
    ''')
    assert (site.line, site.end_line, site.kind) == (2, 4, "substitute")


def test_a_logged_fallback_stands_with_the_test_that_leads_to_it():
    source = '''\
    class XPUPlatform:
        def get_attn_backend_cls(cls, dtype, selected_backend):
            if selected_backend == TRITON:
                return TRITON
            elif dtype == torch.float32:
                logger.warning_once(
                    "Flash Attention on XPU does not support float32 dtype. Falling back to Triton."
                )
                return TRITON
            logger.info_once("Using Flash Attention backend on XPU.")
            return FLASH_ATTN
    '''
    (site,) = sites_of(source, "vllm/platforms/xpu.py")
    assert (site.line, site.end_line, site.kind) == (5, 9, "fallback")


def test_a_comment_heading_a_branch_of_xpu_code_stands_for_the_branch():
    source = '''\
    class XPUPlatform:
        def get_attn_backend_cls(cls, use_mm_prefix):
            if use_mm_prefix:
                # Flash Attention on XPU has no FA4 kernel, so it cannot apply the
                # prefix-LM mask: Triton runs these batches.
                return TRITON
            return FLASH_ATTN
    '''
    (site,) = sites_of(source, "vllm/platforms/xpu.py")
    assert (site.line, site.end_line) == (3, 6)


def test_a_branch_that_only_synchronizes_on_xpu_is_an_extra_sync_one_that_does_more_is_xpu_s_own_way():
    source = '''\
    def broadcast(self):
        if current_platform.is_xpu():
            self.main_stream.synchronize()
        send(self.tokens)

    def replay(graph):
        if current_platform.is_xpu():
            graph.replay()
            torch.xpu.synchronize()
    '''
    (site,) = sites_of(source)
    assert (site.line, site.end_line, site.kind, site.confidence) == (2, 3, "sync", "medium")
    assert site.summary == "(no comment) self.main_stream.synchronize()"


def test_a_site_naming_an_upstream_reference_is_held_with_high_confidence():
    (site,) = sites_of('''\
    if current_platform.is_xpu():
        # Remove once pytorch/pytorch#188240 is released: the launcher rejects host memory.
        config.setdefault("use_static_cuda_launcher", False)
    ''')
    assert (site.kind, site.confidence) == ("switch-off", "high")



def test_a_fact_of_the_platform_worded_as_a_gap_is_no_site_unless_it_names_a_fix_to_wait_for():
    """Unsigned USM addresses are XPU's for good: the arithmetic that suits them is no workaround. The
    same fact behind a component's gap with a version to wait for is one."""
    fact = '''\
    def offsets(addresses):
        if current_platform.is_xpu():
            # Device addresses are unsigned and can have the high bit set (XPU USM), so they
            # are added up in uint64; signed arithmetic rejects them.
            return addresses.view(torch.uint64).sum()
        return addresses.sum()
    '''
    assert sites_of(fact) == []
    waiting = fact.replace("signed arithmetic rejects them.", "torch's setitem rejects them. TODO(torch>=2.14)")
    assert spans(waiting) == [(2, 5)]


def test_vllm_s_own_fixme_a_user_s_choice_and_several_platforms_named_at_once_are_no_site():
    source = '''\
    if current_platform.is_xpu():
        # FIXME: To be verified.
        cascade_attn_enabled = False

    def runner_wrapper():
        # cpu/xpu runners cannot use the CUDA stream/event-based wrapper.
        return plain_wrapper

    if current_platform.is_xpu():
        # Opt-in: F.linear on XPU is faster with an N-contiguous weight, but oneDNN's matmul
        # is not bitwise reproducible.
        weight = weight.t().contiguous().t()
    '''
    assert spans(source) == []


def test_text_that_stands_word_for_word_in_the_cuda_counterpart_is_not_about_xpu(tmp_path):
    generic = '''\
    class {name}Communicator:
        def reduce_scatter(self, input_):
            # Note: This will produce an incorrect answer if we don't make
            # the input_tensor contiguous. Possible bug in oneCCL's reduce_scatter_tensor?
            input_tensor = input_.movedim(0, dim).contiguous()
            {call}
    '''
    folder = "vllm/distributed/device_communicators"
    files = {f"{folder}/cuda_communicator.py": generic.format(name="Cuda", call="nccl(input_tensor)"),
             f"{folder}/xpu_communicator.py": generic.format(name="Xpu", call="xccl(input_tensor)")}
    taken = census_tree(reader.load(manifest_with(tmp_path)), write_tree(tmp_path / "tree", files))
    assert taken.sites == []
    # Alone, with no counterpart saying the same, the XPU module's note is read as its own.
    alone = census_tree(reader.load(manifest_with(tmp_path)),
                        write_tree(tmp_path / "alone", {f"{folder}/xpu_communicator.py": files[f"{folder}/xpu_communicator.py"]}))
    assert [c.site.line for c in alone.sites] == [3]



ROPE = '''\
class Rope:
    def forward_cuda(self, positions, query, key=None):
        {cuda}

    def forward_xpu(self, positions, query, key=None):
        {xpu}
        ops.rotary_embedding(positions, query, key)
        return query, key
'''


def test_a_test_in_forward_xpu_returning_to_the_native_path_is_a_fallback_only_where_cuda_keeps_its_kernel():
    """No comment needed: the XPU kernel lacks a case CUDA's kernel handles. Where CUDA runs the torch
    path too, XPU taking it is dispatch, whatever a comment beside it says."""
    fallback = ROPE.format(cuda="ops.rotary_embedding(positions, query, key)",
                           xpu="if key is None:\n            return self.forward_native(positions, query, key)")
    site = only_site(fallback)
    assert (site.line, site.end_line, site.kind.value) == (6, 7, "fallback")
    assert site.summary.startswith("(no comment) if key is None:")
    assert sites_of(fallback.replace("ops.rotary_embedding(positions, query, key)\n\n", "pass\n\n", 1)) == []
    dispatch = ROPE.format(cuda="return self.forward_native(positions, query, key)",
                           xpu="# No fused XPU kernel for this rope; the generic C++ kernel rejects these\n"
                               "        # positions. Use the native path.\n"
                               "        return self.forward_native(positions, query, key)")
    assert sites_of(dispatch) == []
    assert len(sites_of(dispatch.replace("return self.forward_native(positions, query, key)\n\n",
                                         "ops.rotary_embedding(positions, query, key)\n\n", 1))) == 1



def test_an_xpu_kernel_s_result_cast_back_to_the_caller_s_dtype_is_a_substitute():
    """No comment needed: the kernel emits another dtype than the one asked of it. Only in XPU-only
    code, and only the result of an XPU op."""
    kernel = '''\
    class XPUW4A8Kernel:
        def apply_weights(self, layer, x):
            quant_x, x_scale = quantize(x)
            out = torch.ops._xpu_C.int4_gemm_w4a8(quant_x, x_scale, layer.weight_packed)
            return out.to(x.dtype).reshape(x.shape)
    '''
    site = only_site(kernel)
    assert (site.line, site.end_line, site.kind.value) == (5, 5, "substitute")
    assert sites_of(kernel.replace("XPUW4A8Kernel", "W4A8Kernel")) == []  # generic code: not XPU's
    assert sites_of(kernel.replace("torch.ops._xpu_C.int4_gemm_w4a8", "torch.ops._C.int4_gemm")) == []
    assert sites_of(kernel.replace("out.to(x.dtype)", "out.to(torch.float16)")) == []  # not the caller's dtype


def test_an_xpu_override_of_a_method_its_base_documents_as_a_fallback_is_a_site(tmp_path):
    """The platform interface says platforms without ``torch.inference_mode`` override the method to
    fall back; XPU's override is that fallback, with no comment of its own."""
    interface = '''\
    class Platform:
        @classmethod
        def inference_mode(cls):
            """A device-specific wrapper of `torch.inference_mode`.

            This wrapper is recommended because some hardware backends such as TPU
            do not support `torch.inference_mode`. In such a case, they will fall
            back to `torch.no_grad` by overriding this method.
            """
            return torch.inference_mode(mode=True)

        @classmethod
        def device_count(cls):
            """How many devices there are; platforms override this."""
            return 0
    '''
    xpu = '''\
    class XPUPlatform(Platform):
        @classmethod
        def inference_mode(cls):
            return torch.no_grad()

        @classmethod
        def device_count(cls):
            return torch.xpu.device_count()
    '''
    files = {"vllm/platforms/interface.py": interface, "vllm/platforms/xpu.py": xpu}
    taken = census_tree(reader.load(manifest_with(tmp_path)), write_tree(tmp_path / "tree", files))
    assert [(c.site.file, c.site.line, c.site.end_line, c.site.kind.value) for c in taken.sites] == [
        ("vllm/platforms/xpu.py", 2, 4, "fallback")]
    # The base in another folder says nothing about this module's methods.
    elsewhere = census_tree(reader.load(manifest_with(tmp_path)), write_tree(tmp_path / "elsewhere", {
        "vllm/config/interface.py": interface, "vllm/platforms/xpu.py": xpu}))
    assert elsewhere.sites == []


GRAPHS = '''\
class XPUPlatform:
    def check_and_update_config(cls, compilation_config):
        from vllm.utils.torch_utils import supports_xpu_graph

        if not supports_xpu_graph():
            compilation_config.cudagraph_mode = CUDAGraphMode.NONE
            logger.warning_once(
                "XPU Graph is not supported in the current PyTorch version, disabling cudagraph_mode."
            )
'''
TORCH_UTILS = '''\
def supports_xpu_graph() -> bool:
    return is_torch_equal_or_newer("2.11.0.dev")
'''


@pytest.mark.parametrize(("pins", "decided"), [
    ("torch==2.15.0+xpu\n", "torch 2.15.0 (the release's XPU pin) passes supports_xpu_graph() (torch >= 2.11.0.dev): "
                            "this code never runs at the pins"),
    ("torch==2.10.0+xpu\n", "torch 2.10.0 (the release's XPU pin) fails supports_xpu_graph() (torch >= 2.11.0.dev): "
                            "this code always runs at the pins"),
    (None, None)])
def test_a_site_a_torch_version_test_guards_says_how_the_release_s_pins_decide_it(tmp_path, pins, decided):
    files = {"vllm/platforms/xpu.py": GRAPHS, "vllm/utils/torch_utils.py": TORCH_UTILS}
    (counted,) = census_tree(reader.load(manifest_with(tmp_path)), write_tree(tmp_path / "tree", files, pins=pins)).sites
    assert (counted.site.line, counted.site.end_line, counted.site.kind) == (5, 9, "switch-off")
    assert counted.decided_by_pins == decided
    assert counted.dead is None  # the contract's dead is the covering entry's: none covers it
    assert counted.as_json()["decided_by_pins"] == decided


# ------------------------------------------------------------------ strangers' files


def test_lines_are_numbered_as_python_numbers_them():
    body = ("x = 1\n"
            "# a form feed \x0c, a vertical tab \x0b and a line separator \u2028 are no line breaks\n"
            "if current_platform.is_xpu():\n"
            "    # Remove once pytorch#188240 is released.\n"
            "    y = 2\n")
    for text in (body, body.replace("\n", "\r\n"), body.replace("\n", "\r")):
        (site,) = scan.scan_source("vllm/engine.py", text).sites
        assert (site.line, site.end_line, site.references) == (3, 5, ("pytorch/pytorch#188240",)), repr(text[:40])
        assert "y = 2" in site.code


def test_a_file_with_a_byte_order_mark_or_a_coding_declaration_is_read(tmp_path):
    tree = write_tree(tmp_path / "tree", {})
    (tree / "vllm" / "bom.py").write_bytes(b"\xef\xbb\xbf" + textwrap.dedent(HANG).encode())
    latin = "# -*- coding: latin-1 -*-\n" + textwrap.dedent(HANG).replace("CCL init", "CCL init (d\u00e9j\u00e0)")
    (tree / "vllm" / "latin.py").write_bytes(latin.encode("latin-1"))
    found = {site.file: site for site in scan.scan_tree(tree)}
    assert set(found) == {"vllm/bom.py", "vllm/latin.py"}
    assert found["vllm/bom.py"].line == 1
    assert "d\u00e9j\u00e0" in found["vllm/latin.py"].summary and found["vllm/latin.py"].line == 2


def test_a_tree_nested_deeper_than_python_recurses_is_walked(tmp_path):
    tree = write_tree(tmp_path / "tree", {})
    folders = [tree / "vllm"]
    for _ in range(1100):
        folders.append(folders[-1] / "d")
        folders[-1].mkdir()
    (folders[-1] / "deep.py").write_text(textwrap.dedent(HANG))
    try:
        (site,) = scan.scan_tree(tree)
        assert site.file.startswith("vllm/d/d/") and site.file.endswith("/d/deep.py")
    finally:  # removed from the bottom up: pytest's own clean-up recurses, and would fail on it
        (folders[-1] / "deep.py").unlink()
        for folder in reversed(folders[1:]):
            folder.rmdir()


def test_a_file_too_large_to_be_source_is_passed_over_and_said_in_a_tree_and_in_an_archive(tmp_path):
    large = "x = 1\n" * ((scan.SOURCE_LIMIT // 6) + 1)
    tree = write_tree(tmp_path / "tree", {"vllm/engine.py": HANG, "vllm/generated.py": large})
    said: list[str] = []
    assert [site.file for site in scan.scan_tree(tree, skipped=said.append)] == ["vllm/engine.py"]
    assert said == [f"vllm/generated.py: {len(large)} bytes, more than 4 MiB: not read (no vLLM source file is that large)"]
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    archive.write_bytes(sdist_bytes({
        "vllm-0.99.0/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n",
        "vllm-0.99.0/vllm/engine.py": textwrap.dedent(HANG).encode(),
        "vllm-0.99.0/vllm/generated.py": large.encode(),
    }))
    result = run("--manifest", str(manifest_with(tmp_path)), "census", "--json", str(archive))
    assert result.exit_code == 0, result.output
    assert [site["file"] for site in json.loads(result.stdout)["sites"]] == ["vllm/engine.py"]
    assert "vllm/generated.py" in result.stderr and "more than 4 MiB: not read" in result.stderr


# ------------------------------------------------------------------ the census of a tree


EVENT_RUNNER = '''\
    def wrapper():
        # torch.xpu.Event does not accept the blocking kwarg, so drop it here.
        def _xpu_event(*args, blocking=None, **kwargs):
            return torch.xpu.Event(*args, **kwargs)
    '''


def test_a_covered_site_names_its_entry_and_whether_it_is_dead_at_the_release_s_pins(tmp_path):
    manifest = reader.load(manifest_with(tmp_path, STATIC_LAUNCHER, EVENT_KEYWORDS))
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM,
                                          "vllm/v1/worker/xpu_model_runner.py": EVENT_RUNNER})
    taken = census_tree(manifest, tree)
    assert taken.release == "0.99.0" and {k: str(v) for k, v in taken.pins.items()} == {
        "torch": "2.15.0", "vllm-xpu-kernels": "0.1.17"}
    found = {c.site.file: (c.tracked, c.dead, c.dead_detail) for c in taken.sites}
    assert found["vllm/platforms/xpu.py"] == (
        "vllm-static-launcher-off", True, "vLLM 0.99.0 carries code dead since its XPU pins reached torch 2.14.0")
    assert found["vllm/v1/worker/xpu_model_runner.py"] == (
        "vllm-xpu-event-keywords", False, "partly dead: vLLM 0.99.0 pins torch 2.15.0 for XPU (torch>=2.15.0), but "
                                          "torch.xpu.Event in torch 2.15.0 still rejects the external keyword")


def test_at_older_pins_a_covered_site_is_alive_and_without_pins_it_cannot_be_told(tmp_path):
    manifest = reader.load(manifest_with(tmp_path, STATIC_LAUNCHER))
    files = {"vllm/platforms/xpu.py": PLATFORM}
    (older,) = census_tree(manifest, write_tree(tmp_path / "old", files, pins="torch==2.13.0+xpu\n")).sites
    assert (older.dead, older.dead_detail) == (False, "alive: vLLM 0.99.0 pins torch 2.13.0 for XPU; dead from "
                                                      "torch>=2.14.0")
    (unpinned,) = census_tree(manifest, write_tree(tmp_path / "none", files, pins=None)).sites
    assert unpinned.tracked == "vllm-static-launcher-off" and unpinned.dead is None


def test_uncommented_xpu_code_an_entry_names_is_a_site_because_the_manifest_says_so(tmp_path):
    manifest = reader.load(manifest_with(tmp_path, PP_SYNC))
    files = {"vllm/v1/worker/gpu/pp_utils.py": PP_UTILS}
    (site,) = census_tree(manifest, write_tree(tmp_path / "tree", files)).sites
    assert (site.site.line, site.site.end_line, site.tracked) == (8, 9, "vllm-pp-broadcast-sync")
    assert site.site.summary == "(no comment) vLLM synchronizes the main stream before the broadcast"
    # Without the entry, its shape says it: a branch that only synchronizes on XPU.
    (shaped,) = scan.scan_tree(tmp_path / "tree")
    assert (shaped.line, shaped.end_line, shaped.kind) == (8, 9, "sync")



def test_an_entry_s_uncommented_site_starts_at_the_comment_that_explains_it(tmp_path):
    """The comment above the statement an entry names is its explanation even when it makes no site
    of its own (a defect, no component named as a word): the site runs from it, and says it."""
    ucx = {"id": "vllm-ucx-memtype-cache", "title": "vLLM sets UCX_MEMTYPE_CACHE=n on XPU",
           "file": "vllm/platforms/xpu.py", "marker": 'os.environ["UCX_MEMTYPE_CACHE"] = "n"',
           "carried_in": ">=0.19.0", "link": "https://openucx.readthedocs.io/en/master/faq.html"}
    platform = '''\
    import os


    def check_and_update_config(config):
        config.worker = "xpu"

        # In some cases, the internal memory type cache can misdetect GPU
        # memory as host memory, also leading to invalid memory access.
        # ref. https://openucx.readthedocs.io/en/master/faq.html
        os.environ["UCX_MEMTYPE_CACHE"] = "n"
    '''
    manifest = reader.load(manifest_with(tmp_path, ucx))
    (site,) = census_tree(manifest, write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": platform})).sites
    assert (site.site.line, site.site.end_line, site.tracked) == (7, 10, "vllm-ucx-memtype-cache")
    assert site.site.summary.startswith("In some cases, the internal memory type cache can misdetect GPU memory")


def test_an_entry_whose_marker_is_in_no_xpu_code_is_named_not_invented(tmp_path):
    manifest = reader.load(manifest_with(tmp_path, PP_SYNC))
    moved = PP_UTILS.replace("        if current_platform.is_xpu():\n            self.main_stream", "        self.main_stream")
    taken = census_tree(manifest, write_tree(tmp_path / "tree", {"vllm/v1/worker/gpu/pp_utils.py": moved}))
    assert taken.sites == []
    assert taken.unplaced == ["vllm-pp-broadcast-sync: vllm/v1/worker/gpu/pp_utils.py:8 has "
                              "'self.main_stream.synchronize()', outside any XPU-only code this census reads as a "
                              "workaround"]


# ------------------------------------------------------------------ across releases


def two_censuses(tmp_path: Path, old: dict[str, str], new: dict[str, str], *tracked: dict[str, str]):
    tmp_path.mkdir(exist_ok=True)
    manifest = reader.load(manifest_with(tmp_path, *tracked))
    return compare(census_tree(manifest, write_tree(tmp_path / "new", new, "0.99.1")),
                   census_tree(manifest, write_tree(tmp_path / "old", old, "0.99.0")))


HANG = '''\
if current_platform.is_xpu():
    # Without a shutdown timeout the next start hangs in CCL init.
    shutdown_timeout = 5
'''


def test_a_site_that_moved_is_neither_new_nor_gone(tmp_path):
    moved_down = "import os\n\n\nx = 1\n\n" + HANG
    compared = two_censuses(tmp_path, {"vllm/engine.py": HANG},
                            {"vllm/engine.py": moved_down.replace("shutdown_timeout = 5", "shutdown_timeout = 10")})
    assert (compared.new, compared.gone) == ([], [])
    moved_away = two_censuses(tmp_path / "file", {"vllm/engine.py": HANG}, {"vllm/core/shutdown.py": HANG})
    assert (moved_away.new, moved_away.gone) == ([], [])


def test_a_site_added_and_one_dropped_are_new_and_gone(tmp_path):
    added = '''\
    if current_platform.is_xpu():
        # Possible bug in reduce_scatter_tensor? Make the input contiguous.
        tensor = tensor.contiguous()
    '''
    compared = two_censuses(tmp_path, {"vllm/engine.py": HANG}, {"vllm/comm.py": added})
    assert [(c.site.file, c.site.line) for c in compared.new] == [("vllm/comm.py", 1)]
    assert [(c.site.file, c.site.line) for c in compared.gone] == [("vllm/engine.py", 1)]


FUSION_OFF = '''\
class XPUPlatform:
    def check_and_update_config(cls, config):
        # Disable fusion passes not yet supported on XPU.
        passes = {"fuse_allreduce_rms": "AllReduce + RMSNorm fusion"}
        for flag, name in passes.items():
            if getattr(config, flag):
                logger.warning_once("Feature %r is not yet supported on XPU and will be disabled.", name)
                setattr(config, flag, False)
'''
WRAPPER = '''\
import torch


def _torch_cuda_wrapper():
    # replace cuda APIs with xpu APIs, this should work by default
    torch.cuda.Stream = torch.xpu.Stream
    torch.cuda.current_stream = torch.xpu.current_stream
    torch.cuda.stream = torch.xpu.stream
    torch.cuda.mem_get_info = torch.xpu.mem_get_info
    torch.cuda.Event = torch.Event
    torch.cuda.set_stream = torch.xpu.set_stream
    if supports_xpu_graph():
        torch.cuda.graph = torch.xpu.graph
        torch.cuda.CUDAGraph = torch.xpu.XPUGraph
    yield
'''


def test_an_import_put_under_a_site_s_comment_neither_splits_it_nor_makes_it_new(tmp_path):
    moved = FUSION_OFF.replace("        passes = {", "        from vllm.config.compilation import CompilationMode\n\n"
                                                     "        passes = {")
    compared = two_censuses(tmp_path, {"vllm/platforms/xpu.py": FUSION_OFF}, {"vllm/platforms/xpu.py": moved})
    assert [(c.site.line, c.site.end_line) for c in compared.sites] == [(3, 10)]
    assert (compared.new, compared.gone) == ([], [])


def test_a_site_that_grew_a_comment_and_a_definition_is_neither_new_nor_gone(tmp_path):
    grown = WRAPPER.replace("    torch.cuda.mem_get_info = torch.xpu.mem_get_info\n", "").replace(
        "    # replace cuda APIs with xpu APIs, this should work by default\n",
        "    # Replace cuda APIs with xpu APIs. Each callable gets its own functools.partial.\n").replace(
        "    torch.cuda.Event = torch.Event\n",
        "\n    # torch.xpu.Event does not accept the blocking kwarg, so drop it here.\n"
        "    def _xpu_event(*args, blocking=None, **kwargs):\n        return torch.xpu.Event(*args, **kwargs)\n\n"
        "    torch.cuda.Event = _xpu_event\n")
    compared = two_censuses(tmp_path, {"vllm/v1/worker/xpu_model_runner.py": WRAPPER},
                            {"vllm/v1/worker/xpu_model_runner.py": grown}, EVENT_KEYWORDS)
    assert [(c.site.line, c.tracked) for c in compared.sites] == [(5, "vllm-xpu-event-keywords")]
    assert (compared.new, compared.gone) == ([], [])


def test_a_reworded_site_an_entry_covers_is_the_same_site(tmp_path):
    reworded = PLATFORM.replace("Remove once the released torch\n        # contains pytorch/pytorch#188240.",
                                "Drop this when torch ships\n        # pytorch/pytorch#188240 (a workaround).")
    assert reworded != PLATFORM
    compared = two_censuses(tmp_path, {"vllm/platforms/xpu.py": PLATFORM}, {"vllm/platforms/xpu.py": reworded},
                            STATIC_LAUNCHER)
    assert (compared.new, compared.gone) == ([], [])


# ------------------------------------------------------------------ the command


def test_json_is_one_object_of_the_documented_shape(tmp_path):
    manifest = manifest_with(tmp_path, STATIC_LAUNCHER)
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM})
    result = run("--manifest", str(manifest), "census", "--json", str(tree))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document.pop("tool")["manifest"] == str(manifest)
    assert document.pop("source") == str(tree) and document.pop("pins") == {"torch": "2.15.0",
                                                                             "vllm-xpu-kernels": "0.1.17"}
    assert document == {"schema": 1, "release": "0.99.0", "sites": [{
        "file": "vllm/platforms/xpu.py", "line": 6, "end_line": 12,
        "summary": "Remove once the released torch contains pytorch/pytorch#188240.",
        "references": ["pytorch/pytorch#188240"], "tracked": "vllm-static-launcher-off", "dead": True,
        "partly_dead": False, "dead_since": "vLLM 0.99.0 carries code dead since its XPU pins reached torch 2.14.0",
        "kind": "switch-off", "confidence": "high", "decided_by_pins": None}]}


def test_json_says_of_each_site_what_the_table_says_dead_partly_dead_or_neither(tmp_path):
    manifest = manifest_with(tmp_path, STATIC_LAUNCHER, EVENT_KEYWORDS)
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM, "vllm/engine.py": HANG,
                                          "vllm/v1/worker/xpu_model_runner.py": EVENT_RUNNER})
    table = run("--manifest", str(manifest), "census", str(tree)).stdout
    shown = {site["file"]: (site["tracked"], site["dead"], site["partly_dead"], site["dead_since"])
             for site in json.loads(run("--manifest", str(manifest), "census", "--json", str(tree)).stdout)["sites"]}
    dead_since = "vLLM 0.99.0 carries code dead since its XPU pins reached torch 2.14.0"
    partly = ("partly dead: vLLM 0.99.0 pins torch 2.15.0 for XPU (torch>=2.15.0), but torch.xpu.Event in torch "
              "2.15.0 still rejects the external keyword")
    assert shown == {"vllm/platforms/xpu.py": ("vllm-static-launcher-off", True, False, dead_since),
                     "vllm/v1/worker/xpu_model_runner.py": ("vllm-xpu-event-keywords", False, True, partly),
                     "vllm/engine.py": (None, None, False, None)}
    # Each text the JSON carries is the one the table shows.
    assert f"vllm-static-launcher-off: {dead_since}\n" in table and f"vllm-xpu-event-keywords: {partly}\n" in table
    assert "vllm-static-launcher-off (dead)" in table and "vllm-xpu-event-keywords (partly dead)" in table
    # At older pins the entry is alive: dead false, and no "dead since".
    older = write_tree(tmp_path / "older", {"vllm/platforms/xpu.py": PLATFORM}, pins="torch==2.13.0+xpu\n")
    (alive,) = json.loads(run("--manifest", str(manifest), "census", "--json", str(older)).stdout)["sites"]
    assert (alive["dead"], alive["partly_dead"], alive["dead_since"]) == (False, False, None)


def test_since_adds_new_and_gone_in_the_same_shape(tmp_path):
    manifest = manifest_with(tmp_path)
    old = write_tree(tmp_path / "old", {"vllm/engine.py": HANG}, "0.99.0")
    new = write_tree(tmp_path / "new", {"vllm/platforms/xpu.py": PLATFORM}, "0.99.1")
    result = run("--manifest", str(manifest), "census", "--json", str(new), "--since", str(old))
    document = json.loads(result.stdout)
    assert set(document) == {"schema", "release", "sites", "new", "gone", "tool", "source", "pins"}
    assert [site["file"] for site in document["new"]] == ["vllm/platforms/xpu.py"]
    assert [site["file"] for site in document["gone"]] == ["vllm/engine.py"]
    assert document["gone"][0]["tracked"] is None and set(document["gone"][0]) == set(document["sites"][0])
    text = run("--manifest", str(manifest), "census", str(new), "--since", str(old)).stdout
    assert "new since 0.99.0: 1" in text and "gone since 0.99.0: 1" in text and "vllm/engine.py:1-3" in text


WIDE = '''\
if current_platform.is_xpu():
    # Workaround: oneCCL hangs at shutdown on the second start on the same devices unless the timeout is set
    # before the process group is created, see intel/torch-ccl#123.
    shutdown_timeout = 5
'''


def table_lines(text: str) -> list[str]:
    """The census table's lines (header and rows), escapes of colour removed."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r\n", "\n")
    return plain.split("\n\n")[1].splitlines()


def test_the_table_fits_columns_cutting_with_an_ellipsis_and_piped_output_is_never_cut(tmp_path):
    manifest = manifest_with(tmp_path, STATIC_LAUNCHER)
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM, "vllm/engine.py": WIDE})
    args = ["--manifest", str(manifest), "census", str(tree)]
    sites = json.loads(CliRunner().invoke(app, [*args, "--json"], env={"COLUMNS": "60"}).stdout)["sites"]
    assert any(len(site["summary"]) > 80 for site in sites)  # the JSON is never cut
    whole = CliRunner().invoke(app, args, env={"XPU_WORKAROUNDS_MANIFEST": None, "COLUMNS": None})
    assert whole.exit_code == 0, whole.output
    # Neither COLUMNS nor a terminal: nothing cut, as a script reads it.
    assert all(site["summary"] in whole.stdout for site in sites) and "…" not in whole.stdout
    fitted = CliRunner().invoke(app, args, env={"XPU_WORKAROUNDS_MANIFEST": None, "COLUMNS": "150"})
    assert fitted.exit_code == 0, fitted.output
    lines = table_lines(fitted.stdout)
    assert lines[0].split() == ["SITE", "KIND", "CONFIDENCE", "TRACKED", "REFERENCES", "SUMMARY"]
    assert all(len(line) <= 150 for line in lines[1:]) and any(line.endswith("…") for line in lines[1:])
    for line, site in zip(lines[1:], sites, strict=True):
        where, kind, confidence, tracked, _, summary = re.split(r"\s{2,}", line)
        assert (kind, confidence) == (site["kind"], site["confidence"])
        assert f"{site['file']}:{site['line']}-{site['end_line']}".endswith(where.removeprefix("…"))  # file, lines kept
        assert tracked == ("vllm-static-launcher-off (dead)" if site["tracked"] else "-")  # never cut
        assert site["summary"].startswith(summary.removesuffix("…"))


def test_on_a_narrow_terminal_each_site_stands_on_its_own_line_whole_and_the_rest_fits_below(tmp_path):
    manifest = manifest_with(tmp_path, STATIC_LAUNCHER)
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM, "vllm/engine.py": WIDE})
    code, screen = terminal.on_terminal(["--manifest", str(manifest), "census", str(tree)],
                                        terminal.terminal_env(COLUMNS=None), columns=90)
    assert code == 0, screen
    lines = table_lines(screen)
    sites = [line for line in lines if not line.startswith(" ")]
    assert sites == ["vllm/engine.py:1-4", "vllm/platforms/xpu.py:6-12"]  # the sites, never cut
    assert all(line.startswith("  ") and len(line) <= 90 for line in lines if line not in sites)
    # The rest below each site, a column a line (output.table's stacked layout), free text wrapped, not cut.
    assert lines[lines.index(sites[1]) + 1:] == [
        "  kind: switch-off", "  confidence: high", "  tracked: vllm-static-launcher-off (dead)",
        "  references: pytorch/pytorch#188240", "  summary: Remove once the released torch contains pytorch/pytorch#188240."]
    summary = json.loads(CliRunner().invoke(app, ["--manifest", str(manifest), "census", str(tree), "--json"]).stdout)[
        "sites"][0]["summary"]
    wrapped = lines[lines.index("  tracked: -") + 2:lines.index(sites[1])]
    assert len(wrapped) > 1 and " ".join(line.strip() for line in wrapped) == f"summary: {summary}"
    # COLUMNS, when set, is the width asked for, whatever the window's.
    code, screen = terminal.on_terminal(["--manifest", str(manifest), "census", str(tree)],
                                        terminal.terminal_env(COLUMNS="140"), columns=90)
    assert code == 0 and max(map(len, table_lines(screen))) > 90
    assert all(len(line) <= 140 for line in table_lines(screen))


def test_a_since_that_names_no_release_is_refused_before_any_release_is_fetched(tmp_path, index):
    env = {**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache"),
           "XPU_WORKAROUNDS_MANIFEST": None}
    result = CliRunner().invoke(app, ["--manifest", str(manifest_with(tmp_path)), "census", f"vllm=={VERSION}",
                                      "--since", "0.98.0"], env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr == ("xpu-workarounds: error: --since '0.98.0' is neither vllm==VERSION nor an existing "
                             "wheel, sdist or source tree; did you mean --since vllm==0.98.0?\n")
    assert result.stdout == "" and index.requests == [] and not (tmp_path / "cache").exists()


def test_check_exits_3_only_when_an_untracked_site_names_a_reference(tmp_path):
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM, "vllm/engine.py": HANG})
    untracked = run("--manifest", str(manifest_with(tmp_path)), "census", "--check", str(tree))
    assert untracked.exit_code == 3, untracked.output
    assert "2 sites: 0 tracked, 2 not (1 of them naming an upstream reference)" in untracked.stdout
    tracked = run("--manifest", str(manifest_with(tmp_path, STATIC_LAUNCHER)), "census", "--check", str(tree))
    assert tracked.exit_code == 0, tracked.output  # the hang names no reference: nothing to track yet
    assert run("--manifest", str(manifest_with(tmp_path)), "census", str(tree)).exit_code == 0  # no --check


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    broken = tmp_path / "vllm-0.99.0.tar.gz"
    broken.write_bytes(b"not gzip")
    for what in ("vllm>=0.30", str(tmp_path / "missing.whl"), str(tmp_path), str(broken)):
        result = run("census", what)
        assert result.exit_code == 2, (what, result.output)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    since = run("census", str(write_tree(tmp_path / "tree", {})), "--since", "torch==2.14.0")
    assert since.exit_code == 2 and "neither vllm==VERSION nor" in since.stderr


def test_an_sdist_and_a_wheel_are_read_as_the_release_they_are(tmp_path):
    manifest = manifest_with(tmp_path, STATIC_LAUNCHER)
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    archive.write_bytes(sdist_bytes({
        "vllm-0.99.0/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n",
        "vllm-0.99.0/requirements/xpu.txt": XPU_PINS.encode(),
        "vllm-0.99.0/vllm/platforms/xpu.py": PLATFORM.encode(),
        "vllm-0.99.0/vllm/../../escape.py": PLATFORM.encode(),
    }))
    document = json.loads(run("--manifest", str(manifest), "census", "--json", str(archive)).stdout)
    assert document["release"] == "0.99.0" and [s["dead"] for s in document["sites"]] == [True]
    assert not (tmp_path / "escape.py").exists()
    wheel = tmp_path / "vllm-0.99.0-cp38-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as written:
        written.writestr("vllm-0.99.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n")
        written.writestr("vllm/platforms/xpu.py", PLATFORM)
    document = json.loads(run("--manifest", str(manifest), "census", "--json", str(wheel)).stdout)
    # A wheel has no requirements/xpu.txt: whether the site is dead cannot be told.
    assert [(s["tracked"], s["dead"]) for s in document["sites"]] == [("vllm-static-launcher-off", None)]


def test_a_stranger_s_comment_cannot_write_to_the_terminal_or_plant_a_site_elsewhere(tmp_path):
    hostile = '''\
    if current_platform.is_xpu():
        # Workaround \x1b[2J\x1b]0;pwned\x07 for a bug.
        x = 1
    '''
    tree = write_tree(tmp_path / "tree", {"vllm/engine.py": hostile})
    (tmp_path / "outside.py").write_text(textwrap.dedent(HANG))
    (tree / "vllm" / "linked.py").symlink_to(tmp_path / "outside.py")
    result = run("--manifest", str(manifest_with(tmp_path)), "census", str(tree))
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "vllm/linked.py" not in result.stdout and "1 sites" in result.stdout


def test_check_names_each_untracked_site_and_the_command_that_adopts_it(tmp_path):
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM, "vllm/engine.py": HANG})
    manifest = manifest_with(tmp_path)
    result = run("--manifest", str(manifest), "census", "--check", str(tree))
    assert result.exit_code == 3, result.output
    named = result.stderr.splitlines()
    assert len(named) == 2, result.stderr  # the hang names no reference: not a failure, not named
    assert named[0].startswith("xpu-workarounds: untracked: vllm/platforms/xpu.py:")
    assert named[0].endswith(" names pytorch/pytorch#188240; no [[tracked]] entry covers it")
    assert named[1] == (f"xpu-workarounds: `xpu-workarounds --manifest {manifest} census {tree} --adopt` prints the "
                        "[[tracked]] entry to track it (--write adds it to the manifest)")
    as_json = run("--manifest", str(manifest), "census", "--check", "--json", str(tree))
    assert as_json.exit_code == 3 and as_json.stderr == result.stderr
    assert json.loads(as_json.stdout)["sites"]  # stdout stays one document


def test_json_carries_the_tool_the_release_pins_and_its_source_as_every_reporting_command(tmp_path):
    tree = write_tree(tmp_path / "tree", {"vllm/platforms/xpu.py": PLATFORM})
    manifest = manifest_with(tmp_path)
    document = json.loads(run("--manifest", str(manifest), "census", str(tree), "--json").stdout)
    status = json.loads(run("--manifest", str(manifest), "status", "--json").stdout)
    assert document["tool"]["manifest"] == str(manifest)
    assert set(document["tool"]) == set(status["tool"]) == {"version", "manifest", "manifest_sha256"}
    assert document["tool"]["version"] == status["tool"]["version"]
    assert document["pins"] and all(isinstance(pin, str) for pin in document["pins"].values())
    assert str(tree) in document["source"]
