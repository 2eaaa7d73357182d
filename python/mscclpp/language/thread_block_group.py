"""ThreadBlockGroup: several thread blocks that split one op's data between them."""
from typing import List

from mscclpp.language.errors import DSLValueError

__all__ = ["ThreadBlockGroup"]


class ThreadBlockGroup:
    """Blocks `tb_list`; block tb_list[i] takes slice i of each op given this group."""

    def __init__(self, tb_list: List[int]):
        self.tb_list: List[int] = list(tb_list)
        self._position = {}
        for i, tb in enumerate(self.tb_list):
            if tb in self._position:
                raise DSLValueError(f"thread block {tb} appears twice in the group {self.tb_list}")
            self._position[tb] = i

    def get_internal_id(self, tb: int) -> int:
        """The slice of the group's ops that block `tb` runs."""
        if tb not in self._position:
            raise DSLValueError(f"thread block {tb} is not in the group {self.tb_list}")
        return self._position[tb]

    def numtb(self) -> int:
        return len(self.tb_list)

    def __repr__(self):
        return f"ThreadBlockGroup({self.tb_list})"
