#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""The CLIP-style task's data, model and training loop (imports torch).

Images are small pictures of a coloured shape in one of four places; texts
are captions naming the colour, the shape and the place ("a red bar at top
left"). A convolutional image encoder and a GRU text encoder are trained
contrastively (symmetric InfoNCE with a learned temperature) so that each
picture lands next to its caption. The task's entry points, arguments and
preload list live in :mod:`mlaccel.tasks.clip`, which imports this module
only when the task runs or warms up.
"""

import math
import time

import torch
from torch import nn
from torch.nn import functional
from torch.utils import data as tdata

from mlaccel import tasks

COLOURS = {'red': (1.0, 0.1, 0.1), 'green': (0.1, 0.9, 0.2),
           'blue': (0.1, 0.2, 1.0), 'yellow': (0.9, 0.9, 0.1)}
SHAPES = ('square', 'bar', 'pillar')
PLACES = (('top', 'left'), ('top', 'right'), ('bottom', 'left'),
          ('bottom', 'right'))
VOCAB = ['<pad>', 'a', 'at'] + list(COLOURS) + list(SHAPES) + [
    'top', 'bottom', 'left', 'right']
TOKEN = {word: index for index, word in enumerate(VOCAB)}
SIZE = 16
EMBED = 32


def _draw(shape, colour, place, noise):
    image = noise * 0.15
    row = 0 if place[0] == 'top' else SIZE // 2
    col = 0 if place[1] == 'left' else SIZE // 2
    height, width = {'square': (6, 6), 'bar': (3, 8),
                     'pillar': (8, 3)}[shape]
    row += (SIZE // 2 - height) // 2
    col += (SIZE // 2 - width) // 2
    for channel, value in enumerate(COLOURS[colour]):
        image[channel, row:row + height, col:col + width] = value
    return image


class Pictures(tdata.Dataset):
    """``size`` (image, caption tokens) pairs, item ``i`` fixed by seed."""

    def __init__(self, size, seed):
        self.size = size
        self.seed = seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        gen = torch.Generator().manual_seed(self.seed * 1000003 + index)
        colour = list(COLOURS)[int(torch.randint(len(COLOURS), (1,),
                                                 generator=gen))]
        shape = SHAPES[int(torch.randint(len(SHAPES), (1,), generator=gen))]
        place = PLACES[int(torch.randint(len(PLACES), (1,), generator=gen))]
        noise = torch.rand(3, SIZE, SIZE, generator=gen)
        words = ['a', colour, shape, 'at', place[0], place[1]]
        tokens = torch.tensor([TOKEN[w] for w in words])
        return _draw(shape, colour, place, noise), tokens


class ImageEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.proj = nn.Linear(32 * (SIZE // 4) ** 2, EMBED)

    def forward(self, images):
        return self.proj(self.convs(images).flatten(1))


class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB), EMBED)
        self.gru = nn.GRU(EMBED, EMBED, batch_first=True)
        self.proj = nn.Linear(EMBED, EMBED)

    def forward(self, tokens):
        _, hidden = self.gru(self.embed(tokens))
        return self.proj(hidden[-1])


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = ImageEncoder()
        self.text = TextEncoder()
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def logits(self, images, tokens):
        image = functional.normalize(self.image(images), dim=-1)
        text = functional.normalize(self.text(tokens), dim=-1)
        return self.logit_scale.exp().clamp(max=100) * image @ text.t()

    def loss(self, images, tokens):
        logits = self.logits(images, tokens)
        target = torch.arange(len(logits))
        return (functional.cross_entropy(logits, target) +
                functional.cross_entropy(logits.t(), target)) / 2


def build(seed):
    """The model and its optimizer, initialised from ``seed``."""
    torch.manual_seed(seed)
    model = Clip()
    return model, torch.optim.AdamW(model.parameters(), lr=3e-3)


def warm():
    """Warm-up hook for taskd: build the model and take two steps.

    Imports what the first steps import lazily (the optimizer's first step
    pulls in torch._dynamo) and runs every kernel once.
    """
    model, optimizer = build(0)
    images, tokens = next(iter(tdata.DataLoader(Pictures(8, 0),
                                                batch_size=8)))
    for _ in range(2):
        optimizer.zero_grad()
        model.loss(images, tokens).backward()
        optimizer.step()


def _accuracy(model, dataset):
    images, tokens = next(iter(tdata.DataLoader(dataset,
                                                batch_size=len(dataset))))
    with torch.no_grad():
        text = functional.normalize(model.text(tokens), dim=-1)
        image = functional.normalize(model.image(images), dim=-1)
        # A caption may describe several pictures: a hit is any caption
        # equal to the right one.
        best = (image @ text.t()).argmax(dim=1)
        hits = (tokens[best] == tokens).all(dim=1)
    return float(hits.float().mean())


def train(opts):
    """Train with the full ``opts``; return the loss curve and accuracy."""
    started = time.time()
    seed = int(opts['seed'])
    model, optimizer = build(seed)
    for group in optimizer.param_groups:
        group['lr'] = float(opts['lr'])
    loader = tdata.DataLoader(
        Pictures(int(opts['train_size']), seed), shuffle=True,
        batch_size=int(opts['batch_size']), drop_last=True,
        generator=torch.Generator().manual_seed(seed))
    device = float(opts.get('device_ms') or 0.0) / 1000.0
    losses = []
    while len(losses) < opts['steps']:
        for images, tokens in loader:
            optimizer.zero_grad()
            loss = model.loss(images, tokens)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if device:
                time.sleep(device)
            if len(losses) == 1:
                tasks.report_first_step()
            if len(losses) >= opts['steps']:
                break
    tail = losses[-10:]
    return {
        'seed': seed, 'steps': len(losses),
        'first_loss': losses[0] if losses else None,
        'final_loss': sum(tail) / len(tail) if tail else None,
        'losses': losses[::max(1, len(losses) // 20)],
        'accuracy': _accuracy(model, Pictures(int(opts['eval_size']),
                                              seed + 7919)),
        'threads': torch.get_num_threads(),
        'first_step_at': tasks.first_step_at(),
        'seconds': time.time() - started,
    }
