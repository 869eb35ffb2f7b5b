#!/usr/bin/env python3
"""The PyTorch peer of sdturbo-bench: SD-Turbo's exact architecture in diffusers' and transformers' own modules
(random weights, PyTorch's default initialisation), timed per stage on a CUDA GPU with CUDA events.

Stages as the engine reports them, 512x512 by default, batch 1, one step: the text encoder (CLIPTextModel, 77
tokens), the UNet (one call at t = 999), the VAE decode (AutoencoderKL.decode of latents / 0.18215) and the TAESD
decode (AutoencoderTiny.decode). Modes:
  fp32         eager, fp32 weights, TF32 off (the exact-fp32 reference)
  fp16         eager, fp16 weights
  fp16-graphs  fp16 weights, channels-last, each stage captured once in a CUDA graph and replayed (no Python
               launch overhead: the strongest PyTorch figure, device time only)
Each figure is the median of --runs timed calls after --warmup untimed ones, from CUDA events around the stage
(device time: host overhead between stages is not in these numbers, unlike sdturbo-bench's host clock).
"end to end" sums text encoder + UNet + decoder.

The architecture is written here (stabilityai/sd-turbo's configs), so nothing is downloaded. diffusers comes from a
source tree given with --diffusers-src (the folder that holds the `diffusers` package), so the device needs only
torch and transformers installed. Writes JSON (--json) and prints a short table last.

  python3 scripts/torch_peer.py --diffusers-src /tmp/diffusers/src --json peer.json
"""
import argparse
import json
import statistics
import sys
import time
import traceback

# stabilityai/sd-turbo, text_encoder/config.json (OpenCLIP ViT-H's text tower as SD 2.x uses it: 23 layers)
TEXT = dict(vocab_size=49408, hidden_size=1024, intermediate_size=4096, num_hidden_layers=23,
            num_attention_heads=16, max_position_embeddings=77, hidden_act="gelu", layer_norm_eps=1e-5,
            projection_dim=512)
# unet/config.json ("attention_head_dim" is the number of heads in SD 2.x configs)
UNET = dict(sample_size=64, in_channels=4, out_channels=4, center_input_sample=False, flip_sin_to_cos=True,
            freq_shift=0,
            down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
            block_out_channels=(320, 640, 1280, 1280), layers_per_block=2, downsample_padding=1,
            mid_block_scale_factor=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-5, cross_attention_dim=1024,
            attention_head_dim=(5, 10, 20, 20), use_linear_projection=True, upcast_attention=False)
# vae/config.json
VAE = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
           up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=(128, 256, 512, 512), layers_per_block=2,
           act_fn="silu", latent_channels=4, norm_num_groups=32, sample_size=512, scaling_factor=0.18215)
# AutoencoderTiny's defaults are madebyollin/taesd's architecture.
STAGES = ("text encoder", "unet", "vae decode", "taesd decode")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--diffusers-src", help="folder holding the diffusers package (else the installed one)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--size", type=int, default=512, help="image width and height (a multiple of 64)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--modes", default="fp32,fp16,fp16-graphs")
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def build_models(torch, device):
    from transformers import CLIPTextConfig, CLIPTextModel
    from diffusers import AutoencoderKL, AutoencoderTiny, UNet2DConditionModel
    with torch.device(device):  # initialised on the device: seconds instead of a minute on the host
        models = {
            "text encoder": CLIPTextModel(CLIPTextConfig(**TEXT)),
            "unet": UNet2DConditionModel(**UNET),
            "vae decode": AutoencoderKL(**VAE),
            "taesd decode": AutoencoderTiny(),
        }
    for m in models.values():
        m.eval().requires_grad_(False)
    return models


def stage_calls(torch, models, dtype, size, device, channels_last):
    """One closure per stage over static inputs (CUDA graphs replay them)."""
    h = size // 8
    gen = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, TEXT["vocab_size"], (1, 77), generator=gen).to(device)
    context = (torch.randn(1, 77, 1024, generator=gen) * 0.5).to(device, dtype)
    latents = torch.randn(1, 4, h, h, generator=gen).to(device, dtype)
    sigma = 14.6146
    unet_in = latents / (sigma ** 2 + 1) ** 0.5
    timestep = torch.tensor([999.0], device=device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    unet_in = unet_in.contiguous(memory_format=fmt)
    vae_in = (latents / VAE["scaling_factor"]).contiguous(memory_format=fmt)
    taesd_in = latents.contiguous(memory_format=fmt)
    te, unet, vae, taesd = (models[s] for s in STAGES)
    return {
        "text encoder": lambda: te(ids)[0],
        "unet": lambda: unet(unet_in, timestep, encoder_hidden_states=context).sample,
        "vae decode": lambda: vae.decode(vae_in).sample,
        "taesd decode": lambda: taesd.decode(taesd_in).sample,
    }


def time_stage(torch, call, runs, warmup, graph):
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(max(warmup, 2)):  # warm-up on a side stream, as CUDA graph capture requires
                call()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = call()
        run = g.replay
    else:
        for _ in range(warmup):
            out = call()
        run = call
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        result = run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    if not graph:
        out = result
    finite = bool(torch.isfinite(out.float()).all().item())
    return statistics.median(times), finite


def main():
    args = parse_args()
    if args.diffusers_src:
        sys.path.insert(0, args.diffusers_src)
    import torch
    import diffusers
    import transformers

    device = torch.device(args.device)
    props = torch.cuda.get_device_properties(device)
    report = {
        "tool": "scripts/torch_peer.py",
        "device": props.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "diffusers": diffusers.__version__,
        "transformers": transformers.__version__,
        "size": args.size,
        "runs": args.runs,
        "warmup": args.warmup,
        "statistic": "median of CUDA-event device times per stage",
        "modes": {},
    }
    # Exact fp32 for the fp32 mode; nothing else changes these.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True

    t0 = time.time()
    models = build_models(torch, device)
    report["build_s"] = round(time.time() - t0, 2)
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        entry = {}
        try:
            fp16 = mode.startswith("fp16")
            graphs = mode.endswith("graphs")
            dtype = torch.float16 if fp16 else torch.float32
            for m in models.values():
                m.to(dtype)
                if graphs:
                    m.to(memory_format=torch.channels_last)
            with torch.inference_mode() if not graphs else torch.no_grad():
                calls = stage_calls(torch, models, dtype, args.size, device, graphs)
                for stage in STAGES:
                    ms, finite = time_stage(torch, calls[stage], args.runs, args.warmup, graphs)
                    entry[stage] = {"ms": round(ms, 4), "finite": finite}
            entry["end to end, full VAE"] = round(sum(entry[s]["ms"] for s in STAGES[:3]), 3)
            entry["end to end, TAESD"] = round(sum(entry[s]["ms"] for s in ("text encoder", "unet", "taesd decode")), 3)
        except Exception as e:  # one mode failing must not lose the others
            traceback.print_exc()
            entry["error"] = f"{type(e).__name__}: {e}"
        report["modes"][mode] = entry
        torch.cuda.empty_cache()

    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    print(f"PyTorch peer on {report['device']} (torch {report['torch']}, diffusers {report['diffusers']}), "
          f"{args.size}x{args.size}, median of {args.runs}, device time in ms:")
    modes = list(report["modes"])
    print(f"{'stage':<22}" + "".join(f"{m:>14}" for m in modes))
    for row in STAGES + ("end to end, full VAE", "end to end, TAESD"):
        cells = []
        for m in modes:
            v = report["modes"][m].get(row)
            cells.append("error" if v is None else f"{(v['ms'] if isinstance(v, dict) else v):.3f}")
        print(f"{row:<22}" + "".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()
