"""The benchmarks, one file each, as the controller sees them: what a unit runs, and how its
figures become the record (allreduce, resnet, references, storage, rdma, nccl_tests)."""
