"""Subgroups of an MscclppProcessGroup: the group's split_group method, and split_group for
torch.distributed (which registers the new group with torch the way new_group does)."""
import torch.distributed as dist


class SplitMixin:
    """Part of MscclppProcessGroup: self._splits, the number of splits made so far."""

    def split_group(self, ranks, timeout=None, opts=None, group_name=None, group_desc=None):
        """The group of ranks (ranks of this group, this rank among them) as a new MscclppProcessGroup
        with its own communicators, or None when this rank is not in ranks. Every rank of this group
        calls it, each with its own part of the split, in the same order (as torch's split_group)."""
        self._splits += 1
        ranks = sorted(int(r) for r in ranks)
        if self._rank_ not in ranks:
            return None
        prefix = "mscclpp/split/%d/%s/" % (self._splits, ",".join(map(str, ranks)))
        pg = type(self)(dist.PrefixStore(prefix, self._store), ranks.index(self._rank_), len(ranks),
                        timeout or self._timeout, ranks=ranks)
        pg.setGroupName(group_name or (self._group_name + ":split:%d" % self._splits))
        pg.setGroupDesc(group_desc or (self._group_desc + ":split:%d" % self._splits))
        return pg


def split_group(split_ranks, parent_pg=None, timeout=None, group_desc=None):
    """torch.distributed.split_group for mscclpp groups (torch's own needs a C++ backend that splits):
    split_ranks is a list of lists of parent-group ranks; every rank of the parent calls it; returns
    this rank's new group (registered with torch.distributed like any group), or None."""
    from torch.distributed import distributed_c10d as c10d

    parent = parent_pg or c10d._get_default_group()
    l2g = {v: k for k, v in c10d._world.pg_group_ranks[parent].items()}
    me = parent.rank()
    mine = next((sorted(r) for r in split_ranks if me in r), None)
    if mine is None:
        parent.split_group([], timeout=timeout)  # keeps the split count in step with the members
        return None
    name = c10d._process_group_name(mine, use_hashed_name=True)
    pg = parent.split_group(mine, timeout=timeout, group_name=name, group_desc=group_desc)
    _register(c10d, pg, name, {l2g[r]: i for i, r in enumerate(mine)})
    return pg


def _register(c10d, pg, name, group_ranks):
    """Records pg in torch.distributed's bookkeeping as new_group would: backend, name, tag, and
    group_ranks (global rank -> rank in pg)."""
    backend = dist.Backend("mscclpp")
    c10d._world.pg_map[pg] = (backend, pg.get_group_store())
    c10d._world.pg_names[pg] = name
    c10d._register_process_group(name, pg)
    c10d._world.pg_backend_config[pg] = str(c10d.BackendConfig(backend))
    tag = "ptd:" + name
    c10d._world.tags_to_pg.setdefault(tag, []).append(pg)
    c10d._world.pg_to_tag[pg] = tag
    c10d._world.pg_group_ranks[pg] = group_ranks
