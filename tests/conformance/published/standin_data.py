"""Stand-in data of the shape the published examples download, made here (nothing is fetched): the
iris CSVs (TensorFlow's `iris_training.csv`, `iris_test.csv`: a count line, then four measurements
and a class per row), and MNIST in its idx files, as torchvision's `datasets.MNIST` reads them from
`<root>/MNIST/raw/`, either laid where an example looks or packed as the `pytorch_mnist.tar.gz` that
Determined's examples download; and CIFAR-10's `cifar-10-python.tar.gz` (`cifar_tarball`); the
Titanic CSVs of TensorFlow's boosted-trees tutorial (`write_titanic`); MNIST as the TFRecords
Determined's Estimator examples unpack (`write_mnist_tfrecords`); Fashion-MNIST's gzipped idx files
where Keras's `fashion_mnist.load_data` looks (`write_fashion_mnist`)."""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np

TRAIN, TEST = 320, 64


def _images_and_labels(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Digits a model can learn: a bright square whose position is the label, over noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, count).astype(np.uint8)
    images = rng.integers(0, 60, (count, 28, 28)).astype(np.uint8)
    for image, label in zip(images, labels, strict=True):
        row, col = divmod(int(label), 5)
        image[4 + row * 12 : 12 + row * 12, 1 + col * 5 : 6 + col * 5] = 255
    return images, labels


def write_iris(folder: Path) -> dict[str, Path]:
    """`iris_training.csv` (120 rows) and `iris_test.csv` (30): classes separable by their means."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2)
    paths = {}
    for name, count in (("iris_training.csv", 120), ("iris_test.csv", 30)):
        labels = rng.integers(0, 3, count)
        rows = [f"{count},4,setosa,versicolor,virginica"]
        for label in labels:
            values = rng.normal(loc=[5.0 + label, 3.0, 1.5 + 2 * label, 0.3 + label], scale=0.3)
            rows.append(",".join(f"{v:.1f}" for v in values) + f",{label}")
        paths[name] = folder / name
        paths[name].write_text("\n".join(rows) + "\n")
    return paths


def write_mnist_raw(raw: Path) -> Path:
    """The four idx files of MNIST (small) in `raw`; returns it."""
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, count, seed in (("train", TRAIN, 0), ("t10k", TEST, 1)):
        images, labels = _images_and_labels(count, seed)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, count, 28, 28) + images.tobytes()
        )
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, count) + labels.tobytes())
    return raw


def mnist_tarball(folder: Path) -> Path:
    """`pytorch_mnist.tar.gz` as Determined's examples unpack it into `<download dir>/MNIST`."""
    raw = write_mnist_raw(folder / "tree" / "raw")
    target = folder / "pytorch_mnist.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(raw, arcname="raw")
    return target


CIFAR_URL = "cifar-10-python.tar.gz"


def cifar_tarball(folder: Path) -> Path:
    """`cifar-10-python.tar.gz` in CIFAR-10's python layout, full size (the examples index its five
    10000-image training batches by count): `cifar-10-batches-py/data_batch_1..5` and `test_batch`,
    each a pickled dict of `b"data"` (N x 3072 uint8, channel-major) and `b"labels"`, as Keras's
    `load_batch` reads them, plus `batches.meta`. Each image is one bright band whose colour and row
    are its label, so it compresses to about a megabyte."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / CIFAR_URL
    rng = np.random.default_rng(3)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    with tarfile.open(target, "w:gz", compresslevel=1) as tar:
        for name in names:
            labels = rng.integers(0, 10, 10000)
            images = np.zeros((10000, 3, 32, 32), np.uint8)
            for label in range(10):
                images[labels == label, label % 3, (label // 3) * 8 : (label // 3) * 8 + 8, :] = 255
            batch = {
                b"batch_label": name.encode(),
                b"labels": labels.tolist(),
                b"data": images.reshape(10000, 3072),
            }
            _add_pickle(tar, f"cifar-10-batches-py/{name}", batch)
        meta = {b"label_names": [f"class{i}".encode() for i in range(10)], b"num_cases_per_batch": 10000}
        _add_pickle(tar, "cifar-10-batches-py/batches.meta", meta)
    return target


class _PortablePickler(pickle.Pickler):
    """Pickles arrays as `numpy.ndarray(shape, dtype, bytearray)`, which NumPy 1 and 2 both read, as
    they read the real CIFAR-10 pickles: NumPy 2's own reduction names `numpy._core`, which NumPy 1
    (the TensorFlow environments' `numpy<2`) does not have."""

    def reducer_override(self, obj: object) -> object:
        if isinstance(obj, np.ndarray):
            return np.ndarray, (obj.shape, obj.dtype.str, bytearray(obj.tobytes()))
        return NotImplemented


def _add_pickle(tar: tarfile.TarFile, name: str, value: object) -> None:
    buffer = io.BytesIO()
    _PortablePickler(buffer, protocol=2).dump(value)
    data = buffer.getvalue()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_wikitext(root: Path) -> Path:
    """WikiText-2 as the word language model examples keep it once unzipped and renamed:
    `<root>/data-rank0/wikitext-2/{train,valid,test}.txt`, lines of words (a small vocabulary
    whose sentences repeat, so a model can learn them). Returns `root`, the folder the examples'
    `bind_mounts` entry mounts at their `data.bind_mount_path`."""
    folder = root / "data-rank0" / "wikitext-2"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(50)]
    for name, count in (("train", 400), ("valid", 80), ("test", 80)):
        lines = [" = heading = "] + [
            " ".join(words[j] for j in rng.integers(0, len(words), 12)) for _ in range(count)
        ]
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return root


TITANIC_COLUMNS = "survived,sex,age,n_siblings_spouses,parch,fare,class,deck,embark_town,alone"


def write_titanic(folder: Path) -> dict[str, Path]:
    """`train.csv` (200 rows) and `eval.csv` (60) in the Titanic tutorial's columns and values, with
    survival following sex and class, so boosted trees can learn it."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    classes, decks = ("First", "Second", "Third"), ("unknown", "A", "B", "C", "D", "E", "F")
    towns = ("Southampton", "Cherbourg", "Queenstown")
    paths = {}
    for name, count in (("train.csv", 200), ("eval.csv", 60)):
        rows = [TITANIC_COLUMNS]
        for _ in range(count):
            female, klass = bool(rng.integers(0, 2)), int(rng.integers(0, 3))
            survived = int(rng.random() < (0.75 if female else 0.2) - 0.1 * klass + 0.1)
            siblings, parents = int(rng.integers(0, 3)), int(rng.integers(0, 3))
            rows.append(
                f"{survived},{'female' if female else 'male'},{rng.uniform(1, 70):.1f},{siblings},"
                f"{parents},{rng.uniform(5, 100) * (3 - klass):.4f},{classes[klass]},"
                f"{decks[int(rng.integers(0, len(decks)))]},{towns[int(rng.integers(0, 3))]},"
                f"{'y' if siblings + parents == 0 else 'n'}"
            )
        paths[name] = folder / name
        paths[name].write_text("\n".join(rows) + "\n")
    return paths


MNIST_TFRECORDS = "mnist-tfrecord.tar.gz"


def write_mnist_tfrecords(folder: Path) -> Path:
    """`folder` as Determined's MNIST Estimator examples leave their download directory: the
    `mnist-tfrecord.tar.gz` they look for (present, so they fetch nothing and unpack nothing) and
    `mnist-tfrecord/{train,validation}/*.tfrecord`, `tf.train.Example`s of `image_raw` (784 float32
    bytes, 0 to 1) and `label` (one int64). Written with TensorFlow (imported only here)."""
    import tensorflow as tf  # seconds to import: only for the examples that need it

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MNIST_TFRECORDS).write_bytes(b"")
    for split, count, seed in (("train", TRAIN, 0), ("validation", TEST, 1)):
        (folder / "mnist-tfrecord" / split).mkdir(parents=True, exist_ok=True)
        images, labels = _images_and_labels(count, seed)
        with tf.io.TFRecordWriter(str(folder / "mnist-tfrecord" / split / f"{split}.tfrecord")) as out:
            for image, label in zip(images, labels, strict=True):
                feature = {
                    "image_raw": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[(image / 255.0).astype(np.float32).tobytes()])
                    ),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                }
                out.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return folder


def write_fashion_mnist(keras_home: Path) -> Path:
    """Fashion-MNIST's four gzipped idx files in `<keras_home>/datasets/fashion-mnist/`, where
    Keras's `fashion_mnist.load_data()` looks before it downloads (it checks no hash); returns
    `keras_home`."""
    target = write_mnist_raw(keras_home / "datasets" / "fashion-mnist")
    for path in [p for p in target.iterdir() if p.suffix != ".gz"]:
        path.with_name(f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    return keras_home
