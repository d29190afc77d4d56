#!/usr/bin/python3
"""Export a torchvision / torch.nn model (random weights, eval mode) to ONNX.

usage: export_torchvision.py MODEL OUT.onnx [--opset N] [--batch N]
       export_torchvision.py --list [--set bench]

MODEL is one of the names `--list` prints, with the input shape (batch
excluded) and what the model covers.  `--set bench` lists the real-model
bench set only (bench/real_models.py, tests/models/real_models.sh).

The batch axis of the input is dynamic ('batch'), so tsopt's --input binding
and shape folding are exercised; --batch only sets the example batch used for
tracing.  Weights come from torch.manual_seed(0), so exports are
reproducible; nothing is downloaded (no pretrained weights, backbones
included).  Batch-norm statistics are then measured on seeded random inputs
(calibrate_bn): with the constructors' defaults (mean 0, variance 1) the
activations of a random deep net shrink layer by layer (mobilenet_v3_small's
outputs ~1e-9), so its nonlinearities would only be tested near 0.
Without --opset the model gets the opset this PyTorch exports by
default (14 for torch 1.13), as a user's export would.

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-onnx); another python3 on PATH usually lacks torch.
"""
import argparse
import inspect
import os
import sys
import time


def _seg_out(model):
    """The segmentation model with its 'out' tensor as the output (its forward returns a dict)."""
    import torch

    class SegOut(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)['out']

    return SegOut(model)


def _encoder(d_model, nhead, ff, layers):
    import torch
    layer = torch.nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, dim_feedforward=ff, dropout=0.0,
                                             batch_first=True)
    try:
        return torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    except TypeError:  # older torch without enable_nested_tensor
        return torch.nn.TransformerEncoder(layer, num_layers=layers)


def _vit_small_depth():
    # ViT-B/16's width, heads and patching with 4 of its 12 encoder layers:
    # the same pattern (patch conv, class token, LayerNorm, attention, GELU
    # MLP) at a third of the weights and time.
    import torch
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=12, hidden_dim=768, mlp_dim=3072)
    # torchvision zero-initializes the classifier (fine-tuning starts from
    # it): random weights here, or every output would be 0
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


def _convnext_tiny():
    import torchvision.models as tvm
    m = tvm.convnext_tiny(weights=None)
    # layer scale starts at 1e-6, so each block would add a millionth of its
    # branch (depthwise 7x7, LayerNorm, GELU) to the residual: an error there
    # would not show in the output.  0.3 as a trained net's are O(0.1-1).
    for name, p in m.named_parameters():
        if name.endswith('layer_scale'):
            p.data.fill_(0.3)
    return m


def _tv(name, **kw):
    def make():
        import torchvision.models as tvm
        return getattr(tvm, name)(weights=None, **kw)
    return make


def _tv_video(name):
    def make():
        import torchvision.models.video as tvv
        return getattr(tvv, name)(weights=None)
    return make


def _seg_ctor(name):
    def make():
        import torchvision.models.segmentation as tvs
        # weights_backbone=None: the constructors' default downloads an ImageNet backbone
        return _seg_out(getattr(tvs, name)(weights=None, weights_backbone=None, aux_loss=False))
    return make


def _inception():
    import torchvision.models as tvm
    # init_weights=False keeps PyTorch's default init: torchvision's own
    # (truncated normal, std 0.1, no BN statistics) makes the logits ~1e12.
    # The aux head is training-only.
    return tvm.inception_v3(weights=None, aux_logits=False, init_weights=False)


def _googlenet():
    import torchvision.models as tvm
    # same reason as inception_v3; aux heads are training-only
    return tvm.googlenet(weights=None, aux_logits=False, init_weights=False)


# name: (constructor, input shape without batch, in the bench set, what it covers)
MODELS = {
    'resnet18': (_tv('resnet18'), (3, 224, 224), True, 'classic CNN, residual adds'),
    'resnet50': (_tv('resnet50'), (3, 224, 224), True, 'bottleneck residual CNN'),
    'vgg11': (_tv('vgg11'), (3, 224, 224), True, 'plain conv stack, 120M-weight fully connected head'),
    'squeezenet1_1': (_tv('squeezenet1_1'), (3, 224, 224), True, 'fire modules: 1x1/3x3 concat'),
    'googlenet': (_googlenet, (3, 224, 224), True, 'inception branches, concat'),
    'densenet121': (_tv('densenet121'), (3, 224, 224), True, 'dense concatenation'),
    'mobilenet_v2': (_tv('mobilenet_v2'), (3, 224, 224), True, 'depthwise, inverted residual, ReLU6 (Clip)'),
    'mobilenet_v3_small': (_tv('mobilenet_v3_small'), (3, 224, 224), True,
                           'depthwise, squeeze-excite, hardswish/hardsigmoid'),
    'mobilenet_v3_large': (_tv('mobilenet_v3_large'), (3, 224, 224), True,
                           'depthwise, squeeze-excite, hardswish/hardsigmoid'),
    'efficientnet_b0': (_tv('efficientnet_b0'), (3, 224, 224), True, 'depthwise, squeeze-excite, SiLU'),
    'mnasnet1_0': (_tv('mnasnet1_0'), (3, 224, 224), True, 'depthwise 3x3/5x5, no SE'),
    'shufflenet_v2_x1_0': (_tv('shufflenet_v2_x1_0'), (3, 224, 224), True,
                           'channel shuffle (reshape-transpose-reshape), split'),
    'resnext50_32x4d': (_tv('resnext50_32x4d'), (3, 224, 224), True, 'grouped convolutions (32 groups)'),
    'regnet_y_400mf': (_tv('regnet_y_400mf'), (3, 224, 224), True, 'grouped convolutions, squeeze-excite'),
    'convnext_tiny': (_convnext_tiny, (3, 224, 224), True,
                      'depthwise 7x7, LayerNorm over channels, GELU, layer scale'),
    'vit_b_16_l4': (_vit_small_depth, (3, 224, 224), True,
                    'ViT-B/16 with 4 of 12 layers: patch conv, attention, GELU MLP'),
    'swin_t': (_tv('swin_t'), (3, 224, 224), True, 'shifted-window attention (roll, Mod, masks)'),
    'r3d_18': (_tv_video('r3d_18'), (3, 8, 112, 112), True, '3-D convolutions (video), 8 frames of 112x112'),
    'fcn_resnet50': (_seg_ctor('fcn_resnet50'), (3, 160, 160), True,
                     'segmentation: dilated ResNet-50, bilinear upsampling, 160x160'),
    'deeplabv3_mobilenet_v3_large': (_seg_ctor('deeplabv3_mobilenet_v3_large'), (3, 224, 224), True,
                                     'segmentation: dilated depthwise, ASPP, global-pool branch'),
    'lraspp_mobilenet_v3_large': (_seg_ctor('lraspp_mobilenet_v3_large'), (3, 224, 224), True,
                                  'segmentation: lite R-ASPP head, sigmoid gate, upsampling'),
    'transformer_encoder': (lambda: _encoder(256, 8, 1024, 4), (128, 256), True,
                            'torch.nn.TransformerEncoder, 4 layers, d_model 256, 8 heads, 128 tokens'),
    # not in the bench set: the cheap and older-opset checks of tests/models/torchvision.sh
    'inception_v3': (_inception, (3, 299, 299), False, 'inception v3'),
    'transformer': (lambda: _encoder(64, 4, 128, 2), (16, 64), False, 'small TransformerEncoder'),
}


def calibrate_bn(model, shape, torch):
    """Running statistics of every batch norm = their mean over 3 batches of 4 random inputs."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, *shape))
    model.eval()


def bench_set():
    return [n for n, m in MODELS.items() if m[2]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('model', nargs='?', choices=list(MODELS))
    ap.add_argument('out', nargs='?')
    ap.add_argument('--opset', type=int, default=None, help="default: this PyTorch's default export opset")
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--dynamic', choices=('batch', 'all'), default='batch',
                    help="symbolic input axes: the batch (default), or every size axis: images' "
                         "h and w, video's frames too, the encoder's sequence (bench/dynamic_axes.sh)")
    ap.add_argument('--list', action='store_true', help='print NAME SHAPE WHAT per model (shape without batch)')
    ap.add_argument('--set', choices=('all', 'bench'), default='all', help='--list: every model or the bench set')
    a = ap.parse_args()
    if a.list:
        for name in (bench_set() if a.set == 'bench' else MODELS):
            print('%s %s %s' % (name, 'x'.join(str(d) for d in MODELS[name][1]), MODELS[name][3]))
        return
    if a.model is None or a.out is None:
        ap.error('MODEL and OUT.onnx are required (or --list)')
    if a.batch < 1:
        ap.error('--batch must be >= 1')

    t0 = time.time()
    try:
        import torch
    except ImportError as e:
        sys.exit(f'export: cannot import torch ({e}); run with /usr/bin/python3 after make deps')
    torch.manual_seed(0)
    ctor, shape = MODELS[a.model][0], MODELS[a.model][1]
    model = ctor()
    calibrate_bn(model, shape, torch)
    model.eval()
    x = torch.randn(a.batch, *shape)

    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    tmp = f'{a.out}.tmp-{os.getpid()}'
    axes = {0: 'batch'}
    if a.dynamic == 'all':
        first, names = {2: (1, ['sequence']), 3: (2, ['h', 'w']), 4: (2, ['frames', 'h', 'w'])}[len(shape)]
        axes.update({first + i: n for i, n in enumerate(names)})
    kwargs = dict(
        input_names=['input'],
        output_names=['output'],
        dynamic_axes={'input': axes, 'output': {0: 'batch'}},
        do_constant_folding=True,
    )
    if a.opset is not None:
        kwargs['opset_version'] = a.opset
    # torch >= 2.5 defaults to (or offers) the dynamo exporter; tsopt's tests
    # want the classic TorchScript one, which every version has.
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
    opset = a.opset
    if opset is None:
        try:
            import onnx
            opset = max(o.version for o in onnx.load(a.out, load_external_data=False).opset_import
                        if o.domain in ('', 'ai.onnx'))
        except Exception:  # the file is written; only the message lacks the number
            opset = 'default'
    print(f'export: {a.model} -> {a.out} (opset {opset}, input {list(x.shape)} {a.dynamic} dynamic, '
          f'{time.time() - t0:.1f}s)')


if __name__ == '__main__':
    main()
