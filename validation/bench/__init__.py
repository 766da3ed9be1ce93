"""Certification benchmarks: allreduce sweep, ResNet50 weak scaling, storage random reads.

Two halves that meet only through JSON:
- worker side (`worker`, `comm`, `allreduce`, `resnet`, `storage`): runs on every node
  under torchrun or horovodrun, needs only torch and the standard library;
- orchestration side (`launch`, `suite`, `k8s`, `verdict`): runs where `rackcert bench`
  runs, starts the workers through an existing engine (torchrun with a c10d rendezvous
  over SSH, horovodrun, or Kubernetes manifests), and turns their output into the
  `rackcert.results` models that the report reads.
"""
