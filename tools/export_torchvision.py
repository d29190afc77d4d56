#!/usr/bin/python3
"""Export a torchvision model (random weights, eval mode) to ONNX.

usage: export_torchvision.py MODEL OUT.onnx [--opset N] [--batch N]

MODEL: resnet18, mobilenet_v2, inception_v3, resnext50_32x4d, transformer.
The batch axis of the input is dynamic ('batch'), so tsopt's --input binding
and shape folding are exercised; --batch only sets the example batch used for
tracing. Weights come from torch.manual_seed(0), so exports are reproducible.

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-onnx); another python3 on PATH usually lacks torch.
"""
import argparse
import os
import sys
import time


def build(name):
    import torch
    import torchvision.models as tvm

    if name == 'resnet18':
        return tvm.resnet18(), (3, 224, 224)
    if name == 'mobilenet_v2':
        return tvm.mobilenet_v2(), (3, 224, 224)
    if name == 'resnext50_32x4d':
        return tvm.resnext50_32x4d(), (3, 224, 224)
    if name == 'inception_v3':
        # init_weights=False keeps PyTorch's default init: torchvision's own
        # (truncated normal, std 0.1, no BN statistics) makes the logits ~1e12.
        # The aux head is training-only.
        return tvm.inception_v3(aux_logits=False, init_weights=False), (3, 299, 299)
    if name == 'transformer':
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), (16, 64)
    raise ValueError(name)


MODELS = ('resnet18', 'mobilenet_v2', 'inception_v3', 'resnext50_32x4d', 'transformer')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('model', choices=MODELS)
    ap.add_argument('out')
    ap.add_argument('--opset', type=int, default=13)
    ap.add_argument('--batch', type=int, default=1)
    a = ap.parse_args()
    if a.batch < 1:
        ap.error('--batch must be >= 1')

    t0 = time.time()
    try:
        import torch
    except ImportError as e:
        sys.exit(f'export: cannot import torch ({e}); run with /usr/bin/python3 after make deps')
    torch.manual_seed(0)
    try:
        model, shape = build(a.model)
    except TypeError:
        # Older torch without enable_nested_tensor.
        if a.model != 'transformer':
            raise
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 dropout=0.0, batch_first=True)
        model, shape = torch.nn.TransformerEncoder(layer, num_layers=2), (16, 64)
    model.eval()
    x = torch.randn(a.batch, *shape)

    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    tmp = f'{a.out}.tmp-{os.getpid()}'
    kwargs = dict(
        input_names=['input'],
        output_names=['output'],
        dynamic_axes={'input': {0: 'batch'}, 'output': {0: 'batch'}},
        opset_version=a.opset,
        do_constant_folding=True,
    )
    # torch >= 2.5 defaults to (or offers) the dynamo exporter; tsopt's tests
    # want the classic TorchScript one, which every version has.
    import inspect
    if 'dynamo' in inspect.signature(torch.onnx.export).parameters:
        kwargs['dynamo'] = False
    try:
        # Not under torch.no_grad(): in eval mode without grad, PyTorch takes
        # the fused TransformerEncoderLayer fast path, which has no ONNX export.
        torch.onnx.export(model, (x,), tmp, **kwargs)
        os.replace(tmp, a.out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print(f'export: {a.model} -> {a.out} (opset {a.opset}, input {list(x.shape)} batch dynamic, '
          f'{time.time() - t0:.1f}s)')


if __name__ == '__main__':
    main()
