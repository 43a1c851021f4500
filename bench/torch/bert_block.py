"""PyTorch's side of the BERT-base block benchmark (examples/trainer/bench/bert_block_bench.cc).

    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch/bert_block.py --threads 1 [--json F]

The same post-LN encoder block as ringlet's trainer (hidden 768, 12 heads, FFN 3072, sequence
128, batch 8, dropout 0.1 on the attention probabilities and on both residual branches, GELU
(erf), LayerNorm eps 1e-12, one padded sequence), forward and backward of a cross-entropy over
the block's output, float32. Prints milliseconds per step: the median of timed batches after a
warm-up by time.
"""
import argparse
import json
import math
import statistics
import time

import torch

B, T, C, HEADS, FFN = 8, 128, 768, 12, 3072


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(C, 3 * C)
        self.proj = torch.nn.Linear(C, C)
        self.ln1 = torch.nn.LayerNorm(C, eps=1e-12)
        self.fc1 = torch.nn.Linear(C, FFN)
        self.fc2 = torch.nn.Linear(FFN, C)
        self.ln2 = torch.nn.LayerNorm(C, eps=1e-12)
        self.drop = torch.nn.Dropout(0.1)

    def attention(self, x, key_valid):
        q, k, v = self.qkv(x).split(C, dim=-1)
        shape = (B, T, HEADS, C // HEADS)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(C // HEADS)
        scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
        probs = self.drop(torch.softmax(scores, dim=-1))
        return self.proj((probs @ v).transpose(1, 2).reshape(B, T, C))

    def forward(self, x, key_valid):
        h = self.ln1(x + self.drop(self.attention(x, key_valid)))
        f = self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(h))))
        return self.ln2(h + f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    block = Block()
    x = torch.randn(B, T, C, requires_grad=True)
    key_valid = torch.ones(B, T, dtype=torch.bool)
    key_valid[0, 100:] = False
    targets = torch.arange(B * T) % C

    def step():
        block.zero_grad(set_to_none=False)
        y = block(x, key_valid)
        torch.nn.functional.cross_entropy(y.reshape(B * T, C), targets).backward()

    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        step()
    times = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    ms = 1000 * statistics.median(times)
    print(f"torch {torch.__version__} BERT-base block fwd+bwd, {args.threads} thread(s): "
          f"{ms:.1f} ms/step (median of {len(times)})")
    if args.json:
        json.dump({"threads": args.threads, "ms_per_step": ms, "steps": len(times),
                   "torch": torch.__version__}, open(args.json, "w"))


if __name__ == "__main__":
    main()
