"""Tests of trainleak.data against the real staged data and small synthetic files."""

from __future__ import annotations

import gzip
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import require_data
from trainleak.data import (
    CIFAR10_CLASSES,
    CorruptDataError,
    ImageDataset,
    balanced_binary,
    balanced_subset,
    binary_task,
    from_symmetric,
    load_cifar10,
    load_dataset,
    load_digits,
    load_mnist,
    load_orl_faces,
    load_wikitext2,
    resolve_data_dir,
    to_symmetric,
)
from trainleak.errors import ConfigError, DataNotFoundError, UnsafeFileError

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data_root() -> Path:
    root = Path(os.environ.get("TRAINLEAK_DATA", str(REPO_ROOT.parent / "shared" / "data")))
    return require_data(root)


def _need(path: Path) -> Path:
    return require_data(path, "staged data file")


@pytest.fixture(scope="module")
def mnist_train(data_root: Path) -> ImageDataset:
    _need(data_root / "mnist" / "train-images-idx3-ubyte.gz")
    return load_mnist("train", data_dir=data_root)


@pytest.fixture(scope="module")
def cifar_train(data_root: Path) -> ImageDataset:
    _need(data_root / "cifar10" / "cifar10_batch_0.png")
    return load_cifar10("train", data_dir=data_root)


@pytest.fixture(scope="module")
def digits() -> ImageDataset:
    return load_digits()


# --- data folder resolution -------------------------------------------------------------


def test_resolve_data_dir_prefers_argument_then_env(tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("TRAINLEAK_DATA", str(other))
    assert resolve_data_dir(tmp_path) == tmp_path
    assert resolve_data_dir(None) == other


def test_resolve_data_dir_says_how_to_supply_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINLEAK_DATA", raising=False)
    with pytest.raises(DataNotFoundError, match=r"data_dir=.*TRAINLEAK_DATA="):
        resolve_data_dir(None)
    with pytest.raises(DataNotFoundError, match="does not exist"):
        resolve_data_dir(tmp_path / "nowhere")


# --- digits, MNIST ----------------------------------------------------------------------


def test_digits_need_no_files(digits, monkeypatch):
    monkeypatch.delenv("TRAINLEAK_DATA", raising=False)
    assert len(digits) == 1797 and digits.input_shape == (1, 8, 8)
    assert digits.x.dtype == torch.float32 and digits.y.dtype == torch.int64
    assert float(digits.x.min()) == 0.0 and float(digits.x.max()) == 1.0
    assert torch.equal(digits.x * 16, (digits.x * 16).round())  # 17 grey levels
    assert load_dataset("digits").y.tolist() == digits.y.tolist()


def test_mnist_train_matches_readme(mnist_train):
    assert mnist_train.x.shape == (60000, 1, 28, 28)
    assert mnist_train.y[:5].tolist() == [5, 0, 4, 1, 9]
    hist = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert torch.bincount(mnist_train.y).tolist() == hist
    assert abs(float(mnist_train.x.mean()) - 0.1307) < 1e-3
    assert float(mnist_train.x.min()) >= 0.0 and float(mnist_train.x.max()) <= 1.0


def test_mnist_test_split_and_limit(data_root):
    _need(data_root / "mnist" / "t10k-images-idx3-ubyte.gz")
    test = load_mnist("test", data_dir=data_root)
    assert test.x.shape == (10000, 1, 28, 28) and test.name == "mnist-test"
    assert torch.bincount(test.y).tolist()[:3] == [980, 1135, 1032]
    head = load_mnist("test", data_dir=data_root, limit=7)
    assert len(head) == 7 and torch.equal(head.x, test.x[:7])


def test_mnist_via_env_and_load_dataset(data_root, monkeypatch):
    _need(data_root / "mnist" / "t10k-images-idx3-ubyte.gz")
    monkeypatch.setenv("TRAINLEAK_DATA", str(data_root))
    ds = load_dataset("mnist", split="test", limit=3)
    assert ds.y.tolist() == [7, 2, 1]


def test_mnist_accepts_uncompressed_files(data_root, tmp_path):
    src = _need(data_root / "mnist")
    (tmp_path / "mnist").mkdir()
    for kind in ("images-idx3", "labels-idx1"):
        raw = gzip.decompress((src / f"t10k-{kind}-ubyte.gz").read_bytes())
        (tmp_path / "mnist" / f"t10k-{kind}-ubyte").write_bytes(raw)
    ds = load_mnist("test", data_dir=tmp_path, limit=3)
    assert ds.y.tolist() == [7, 2, 1]


def test_missing_mnist_file_names_file_folder_and_remedy(tmp_path):
    (tmp_path / "mnist").mkdir()
    with pytest.raises(DataNotFoundError) as err:
        load_mnist("train", data_dir=tmp_path)
    msg = str(err.value)
    assert "train-images-idx3-ubyte.gz" in msg
    assert str(tmp_path / "mnist") in msg
    assert "data_dir=" in msg and "TRAINLEAK_DATA=" in msg


def _idx(magic: int, dims: tuple[int, ...], payload: bytes) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims)
    return header + payload


@pytest.mark.parametrize(
    ("labels", "problem"),
    [
        (gzip.compress(_idx(0x801, (4,), bytes(4)))[:-10], "decompress"),
        (gzip.compress(_idx(0x801, (4,), bytes(3))), "truncated"),
        (gzip.compress(_idx(0x803, (4,), bytes(4))), "magic"),
        (gzip.compress(b"\x00\x00"), "header"),
    ],
    ids=["truncated-gzip", "truncated-idx", "bad-magic", "no-header"],
)
def test_corrupt_mnist_file_is_reported(tmp_path, labels, problem):
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(
        gzip.compress(_idx(0x803, (4, 28, 28), bytes(4 * 784)))
    )
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(labels)
    with pytest.raises(CorruptDataError, match=problem) as err:
        load_mnist("test", data_dir=tmp_path)
    assert isinstance(err.value, DataNotFoundError)
    assert "t10k-labels-idx1-ubyte.gz" in str(err.value)


def test_truncated_real_mnist_copy(data_root, tmp_path):
    src = _need(data_root / "mnist")
    (tmp_path / "mnist").mkdir()
    gz = (src / "t10k-images-idx3-ubyte.gz").read_bytes()
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz").write_bytes(gz[: len(gz) // 2])
    shutil.copy(src / "t10k-labels-idx1-ubyte.gz", tmp_path / "mnist")
    with pytest.raises(CorruptDataError, match="t10k-images-idx3-ubyte.gz"):
        load_mnist("test", data_dir=tmp_path)


# --- CIFAR-10 ---------------------------------------------------------------------------


def test_cifar_sprites_match_readme(cifar_train):
    assert cifar_train.x.shape == (4000, 3, 32, 32) and cifar_train.classes == CIFAR10_CLASSES
    assert cifar_train.y[:10].tolist() == [6, 9, 9, 4, 1, 1, 2, 7, 8, 3]
    red_row = (cifar_train.x[0, 0, 0] * 255).round().to(torch.uint8)
    assert red_row[:9].tolist() == [59, 43, 50, 68, 98, 119, 139, 145, 149]
    hist = [396, 366, 420, 384, 422, 393, 414, 385, 407, 413]
    assert torch.bincount(cifar_train.y).tolist() == hist


def test_cifar_limit_and_partial_sprites(data_root, cifar_train):
    part = load_cifar10(data_dir=data_root, limit=1500)
    assert torch.equal(part.x, cifar_train.x[:1500]) and torch.equal(part.y, cifar_train.y[:1500])
    with pytest.warns(UserWarning, match="only 4000"):
        assert len(load_cifar10(data_dir=data_root, limit=4500)) == 4000


def test_cifar_missing_test_sprite_is_named(data_root, tmp_path):
    folder = _need(data_root / "cifar10")
    staged = tmp_path / "cifar10"
    staged.mkdir()
    for f in folder.iterdir():  # everything but the test sprite, whatever is staged upstream
        if f.name != "cifar10_batch_50.png":
            (staged / f.name).symlink_to(f)
    with pytest.raises(DataNotFoundError, match=r"cifar10_batch_50\.png.*TRAINLEAK_DATA="):
        load_cifar10("test", data_dir=tmp_path)


def test_cifar_missing_folder(tmp_path):
    with pytest.raises(DataNotFoundError, match="cifar-10-batches-py") as err:
        load_cifar10(data_dir=tmp_path)
    assert str(tmp_path / "cifar10") in str(err.value)


def test_cifar_sprites_without_labels_file(data_root, tmp_path):
    src = _need(data_root / "cifar10" / "cifar10_batch_0.png")
    (tmp_path / "cifar10").mkdir()
    shutil.copy(src, tmp_path / "cifar10")
    with pytest.raises(DataNotFoundError, match=r"cifar10_labels\.txt"):
        load_cifar10(data_dir=tmp_path)


def test_truncated_cifar_sprite(data_root, tmp_path):
    src = _need(data_root / "cifar10" / "cifar10_batch_0.png")
    (tmp_path / "cifar10").mkdir()
    shutil.copy(src.parent / "cifar10_labels.txt", tmp_path / "cifar10")
    png = src.read_bytes()
    (tmp_path / "cifar10" / "cifar10_batch_0.png").write_bytes(png[: len(png) // 3])
    with pytest.raises(CorruptDataError, match=r"cifar10_batch_0\.png"):
        load_cifar10(data_dir=tmp_path, limit=10)


def _fake_batches(root: Path, sizes: dict[str, int], protocol: int) -> dict[str, np.ndarray]:
    folder = root / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    out = {}
    for name, n in sizes.items():
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=n)]
        with (folder / name).open("wb") as f:
            pickle.dump({b"batch_label": b"x", b"data": data, b"labels": labels}, f, protocol)
        out[name] = data
    return out


@pytest.mark.parametrize("protocol", [2, pickle.DEFAULT_PROTOCOL])
def test_cifar_python_batches(tmp_path, protocol):
    sizes = {f"data_batch_{i}": 2 for i in range(1, 6)} | {"test_batch": 3}
    data = _fake_batches(tmp_path, sizes, protocol)
    train = load_cifar10("train", data_dir=tmp_path)
    assert train.x.shape == (10, 3, 32, 32)
    # rows are planar: 1024 red, 1024 green, 1024 blue values, each 32 x 32 row-major
    first = data["data_batch_1"][0]
    assert (train.x[0, 1, 0, :3] * 255).round().tolist() == first[1024:1027].tolist()
    assert torch.equal(
        (train.x[2] * 255).round(), torch.tensor(data["data_batch_2"][0]).view(3, 32, 32).float()
    )
    assert len(load_cifar10("test", data_dir=tmp_path)) == 3


def test_cifar_python_batches_read_only_what_limit_needs(tmp_path):
    _fake_batches(tmp_path, {"data_batch_1": 4}, pickle.DEFAULT_PROTOCOL)
    assert len(load_cifar10(data_dir=tmp_path, limit=4)) == 4
    with pytest.raises(DataNotFoundError, match="data_batch_2"):
        load_cifar10(data_dir=tmp_path, limit=5)


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_without_running(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    marker = tmp_path / "pwned"
    payload = {b"data": _Evil(marker), b"labels": []}
    (folder / "data_batch_1").write_bytes(pickle.dumps(payload))
    with pytest.raises(UnsafeFileError, match=r"data_batch_1.*system"):
        load_cifar10(data_dir=tmp_path, limit=1)
    assert not marker.exists()


def test_pickle_codec_other_than_latin1_is_refused(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    blob = pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0]}, protocol=2)
    assert b"latin1" in blob  # protocol 2 stores bytes as _codecs.encode(str, "latin1")
    (folder / "data_batch_1").write_bytes(blob.replace(b"latin1", b"rot_13"))
    with pytest.raises(UnsafeFileError, match="rot_13"):
        load_cifar10(data_dir=tmp_path, limit=1)


def test_pickle_with_wrong_structure_is_corrupt(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(CorruptDataError, match="data_batch_1"):
        load_cifar10(data_dir=tmp_path, limit=1)
    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": 1})[:-3])
    with pytest.raises(CorruptDataError, match="data_batch_1"):
        load_cifar10(data_dir=tmp_path, limit=1)


# --- ORL faces, WikiText-2 --------------------------------------------------------------


def test_orl_faces(data_root):
    _need(data_root / "att_faces" / "s40" / "10.pgm")
    faces = load_orl_faces(data_root)
    assert faces.x.shape == (400, 1, 112, 92) and faces.name == "orl"
    assert torch.bincount(faces.y).tolist() == [10] * 40
    assert faces.classes[0] == "s1" and faces.y[:11].tolist() == [0] * 10 + [1]
    assert load_dataset("orl", data_dir=data_root).x.shape == faces.x.shape


def test_orl_missing_and_corrupt(data_root, tmp_path):
    (tmp_path / "att_faces" / "s1").mkdir(parents=True)
    with pytest.raises(DataNotFoundError, match=r"s1/1\.pgm"):
        load_orl_faces(tmp_path)
    src = _need(data_root / "att_faces" / "s1" / "1.pgm").read_bytes()
    (tmp_path / "att_faces" / "s1" / "1.pgm").write_bytes(src[:200])
    with pytest.raises(CorruptDataError, match=r"1\.pgm"):
        load_orl_faces(tmp_path)


def test_wikitext2(data_root):
    _need(data_root / "text" / "wikitext-2" / "test.txt")
    paras = load_wikitext2("test", data_dir=data_root)
    assert paras[0].startswith("Robert <unk> is an English film")
    assert all(p and p == p.strip() for p in paras)
    assert not any(p.startswith("= ") and p.endswith(" =") for p in paras)  # no headings
    assert "= National record" in paras  # a table legend, not a heading: kept
    assert len(paras) > 1000 and len(load_wikitext2("valid", data_root)) > 1000
    with pytest.raises(ConfigError, match="split"):
        load_wikitext2("train", data_root)  # type: ignore[arg-type]


def test_wikitext2_missing_and_not_utf8(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"valid\.txt"):
        load_wikitext2("valid", tmp_path)
    folder = tmp_path / "text" / "wikitext-2"
    folder.mkdir(parents=True)
    (folder / "test.txt").write_bytes(b"ok\n\xff\xfe broken\n")
    with pytest.raises(CorruptDataError, match="UTF-8"):
        load_wikitext2("test", tmp_path)


def test_load_dataset_unknown_name_and_bad_args(tmp_path):
    with pytest.raises(ConfigError, match="'dataset'.*imagenet"):
        load_dataset("imagenet")
    with pytest.raises(ConfigError, match="split"):
        load_mnist("val", data_dir=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="limit"):
        load_mnist(data_dir=tmp_path, limit=0)


# --- ImageDataset, subsets, binary tasks, transforms --------------------------------------


def test_image_dataset_contract(digits):
    assert digits.subset(torch.tensor([3, 1])).y.tolist() == digits.y[[3, 1]].tolist()
    mask = digits.y == 0
    assert len(digits.subset(mask)) == int(mask.sum())
    assert "n=1797" in repr(digits) and len(repr(digits)) < 120
    with pytest.raises(ConfigError, match="idx"):
        digits.subset([5000])
    with pytest.raises(ConfigError, match="float32"):
        ImageDataset("bad", digits.x.double(), digits.y, digits.classes)
    with pytest.raises(ConfigError, match="labels"):
        ImageDataset("bad", digits.x[:2], torch.tensor([0, 10]), digits.classes)


def test_balanced_subset(digits):
    state = torch.random.get_rng_state()
    sub = balanced_subset(digits, 7, seed=3)
    assert torch.bincount(sub.y).tolist() == [7] * 10
    assert torch.equal(torch.random.get_rng_state(), state)  # no global seeding
    again = balanced_subset(digits, 7, seed=3)
    assert torch.equal(again.x, sub.x)
    assert not torch.equal(balanced_subset(digits, 7, seed=4).x, sub.x)
    two = balanced_subset(digits, 4, classes=[8, 2])
    assert two.y.tolist() == [8] * 4 + [2] * 4 and two.classes == digits.classes


def test_balanced_subset_errors(digits):
    with pytest.raises(ConfigError, match="per_class"):
        balanced_subset(digits, 1000)
    with pytest.raises(ConfigError, match="per_class"):
        balanced_subset(digits, 0)
    with pytest.raises(ConfigError, match="classes"):
        balanced_subset(digits, 2, classes=[1, 1])


def test_binary_task_odd_even(digits):
    task = binary_task(digits, "odd_even")
    assert task.classes == ("even", "odd")
    assert torch.equal(task.y, digits.y % 2)
    assert task.x.data_ptr() == digits.x.data_ptr()
    with pytest.raises(ConfigError, match="vehicles_animals"):
        binary_task(digits, "vehicles_animals")
    with pytest.raises(ConfigError, match="kind"):
        binary_task(digits, "big_small")  # type: ignore[arg-type]


def test_binary_task_vehicles_animals():
    labels = torch.arange(10)
    cifar = ImageDataset("toy-cifar", torch.zeros(10, 3, 2, 2), labels, CIFAR10_CLASSES)
    task = binary_task(cifar, "vehicles_animals")
    assert task.classes == ("animal", "vehicle")
    assert task.y.tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 1, 1]
    with pytest.raises(ConfigError, match="odd_even"):
        binary_task(cifar, "odd_even")


def test_balanced_binary_spreads_over_original_classes(digits):
    sub = balanced_binary(digits, "odd_even", 52, seed=1)
    assert sub.classes == ("even", "odd") and sub.y.tolist() == [0] * 52 + [1] * 52
    # recover the original digits through the pixels: each image is one digit's sample
    orig = {tuple(x.flatten().tolist()): int(y) for x, y in zip(digits.x, digits.y)}
    counts = torch.bincount(torch.tensor([orig[tuple(x.flatten().tolist())] for x in sub.x]))
    # 52 per group over five digits: 11, 11, 10, 10, 10 (remainder to the lower digits)
    assert counts.tolist() == [11, 11, 11, 11, 10, 10, 10, 10, 10, 10]


def test_balanced_binary_makes_up_for_small_classes():
    y = torch.tensor([0] * 20 + [2] * 3 + [4] * 20 + [1] * 30)
    ds = ImageDataset("toy", torch.rand(len(y), 1, 1, 1), y, tuple("0123456789"))
    sub = balanced_binary(ds, "odd_even", 30, seed=0)
    picked = ds.y[[int(((ds.x.flatten() - v).abs() < 1e-9).nonzero()) for v in sub.x.flatten()]]
    assert torch.bincount(picked, minlength=5).tolist() == [14, 30, 3, 0, 13]
    with pytest.raises(ConfigError, match="'odd'"):
        balanced_binary(ds, "odd_even", 31)


def test_symmetric_range_and_round_trip(digits):
    sym = to_symmetric(digits.x)
    assert float(sym.min()) == -1.0 and float(sym.max()) == 1.0
    assert torch.allclose(from_symmetric(sym), digits.x)
    assert float(digits.x.min()) == 0.0  # input untouched
