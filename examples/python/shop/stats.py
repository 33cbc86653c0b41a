"""Per-category statistics computed in worker threads."""

import threading


class CategoryStats:
    def __init__(self, category, items):
        self.category = category
        self.items = items
        self.result = None

    def compute(self):
        count = sum(item.stock for item in self.items)
        value = sum(item.value_cents() for item in self.items)
        self.result = (self.category, count, value)


def compute_all(inventory):
    """One named thread per category; results sorted so the output is deterministic."""
    jobs = [CategoryStats(c, items) for c, items in inventory.by_category().items()]
    threads = [threading.Thread(target=job.compute, name="stats-%s" % job.category) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(job.result for job in jobs)
