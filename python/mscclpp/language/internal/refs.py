"""Value types the op records are made of: chunk references, thread block group slices, the
chunk ranges an op touches (Access) and the semaphores signals raise (Link)."""
from dataclasses import dataclass

from mscclpp.language.internal.types import BufferType, ChannelType, Chunk


@dataclass
class LocalRef:
    type: BufferType
    index: int
    size: int

    def to_dict(self):
        return {"type": self.type.value, "index": self.index, "size": self.size}


@dataclass
class RemoteRef:
    """A chunk of peer `rank`'s buffer, reached through the block's remote buffer ref `buffer_id`
    (the plan names only the ref; `rank` is for the checks)."""
    type: BufferType
    index: int
    size: int
    buffer_id: int
    rank: int = -1

    def to_dict(self):
        return {"buffer_id": self.buffer_id, "index": self.index, "size": self.size}


@dataclass
class GroupInfo:
    """This block's slice `tb_id` of an op split over a thread block group of `tbg_size` blocks."""
    tb_id: int
    tbg_size: int

    def to_dict(self):
        return {"tb_id": self.tb_id, "tbg_size": self.tbg_size}


@dataclass
class Access:
    """Chunks [start, end] of a local buffer, read ("r") or written ("w") by op `owner`."""
    owner: int
    buffer: BufferType
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class Link:
    """The semaphore a signal raises: channel number `ordinal` of `channel_type` from `sender` to
    `receiver` (the executor pairs the k-th such channel of each side)."""
    channel_type: ChannelType
    sender: int
    receiver: int
    ordinal: int

    def renumbered(self, move) -> "Link":
        """The same link in another instance (channel ordinals replicate like channel ids)."""
        return Link(self.channel_type, self.sender, self.receiver, move(self.ordinal))


def span(owner, ref, kind):
    """The Access of a LocalRef / RemoteRef (`type`) or a Chunk (`buffer`)."""
    buffer = ref.buffer if isinstance(ref, Chunk) else ref.type
    return Access(owner, buffer, ref.index, ref.index + ref.size - 1, kind)
