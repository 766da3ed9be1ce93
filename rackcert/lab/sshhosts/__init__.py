"""Real SSH test hosts: Debian's sshd, each in its own network, mount and UTS namespace.

Why: rackcert's guest layer (Ansible, testinfra, torchrun over SSH) must be tested
against real hosts, not mocks, and the lab needs stand-ins for its VMs. One
machine plays several hosts:

- network: every host has its own netns with one interface `eth0` (a veth) whose
  other end hangs on a bridge in the root namespace. The bridge owns the subnet's
  `.1` and is the hosts' default gateway, so the root namespace reaches every
  host and the hosts reach each other (SSH between peers, rendezvous for
  torch.distributed). The MTU of each host's `eth0` is its own.
- files: /etc, /usr, /var, /opt, /home, /srv and /mnt are overlays whose upper
  layer is a tmpfs private to the host, and /root is a fresh home (Debian's
  default dot files only), so `apt install`, `/root/.ssh`, `/etc/hosts`, mounts
  and dpkg's database are per host and vanish with it; the machine itself is
  never changed by a playbook, and its own dot files (pyenv shims...) do not leak
  in. The rackcert checkout and the controller's virtualenv are hidden (an empty
  tmpfs over each, `private`): a node runs rackcert's bench worker from its own
  environment, as on a real rack. Everything else (/tmp, /run, ...) is shared,
  read-write. `shared` paths stay shared even below an overlaid directory (the lab's
  NFS stand-in).
- the node image's DL framework: where the machine has the lab DL stack
  (LAB_DL_SITE, made by .ci/setup.d/45-lab-dl-stack.sh: torch, torchvision, Horovod),
  each host's system Python sees it through a .pth in its own /usr (as a DL image has
  its framework installed system-wide).
- name: `unshare --uts`, so `hostname` answers the host's own name; /etc/hosts
  lists every host of the set.

Namespaces are named `rackcert-<owner>-<host>`; the owner is the test process's
pid (so parallel runs and xdist workers never collide) or `lab` for the lab.
What dead pids left behind is cleared by rackcert.lab.lifetime.clear_stale (never `lab`).
Needs root, iproute2, util-linux and openssh-server; no kernel modules.

One module per idea:
    host     TestHost: one running host, what a client needs to reach it, its faults
    start    start_hosts / stop_hosts: a set of hosts brought up and taken down
    network  namespaces, veths, bridges and subnets (owner naming, claim_subnet, stop_owner)
    sshd     keys and sshd: the client key pair, host keys, sshd_config, known_hosts
    rootfs   what a host sees of the file system: overlays, private and shared paths, cgroups
    lab      the lab's view of a spec: its VMs started as hosts at their spec addresses
    common   the error, the command runner and the runtime directory all of them share

API:
    hosts = start.start_hosts(["h1", "h2"], "10.201.7.0/24", key_file=tmp / "id_ed25519")
    hosts[0].ssh("hostname")          # -> CompletedProcess, stdout "h1\\n"
    hosts[0].exec(["ip", "link"])     # nsenter, no SSH involved
    hosts[0].path("/etc/hosts")       # the host's own view of a file, from outside
    hosts[1].kill()                   # SIGKILL everything in h2: SSH is refused now
    start.stop_hosts(hosts)           # idempotent

    subnet = network.claim_subnet()   # a free 10.x.y.0/24 for a test (atomic, via the bridge)
    hosts = lab.start_lab_hosts(spec) # the spec's VMs at their addresses, owner "lab"
    lab.stop_lab_hosts()

A TestHost's fields (name, address, port, netns, key_file, pid, user) and
`known_hosts` / `to_dict()` are what an Ansible inventory or a testinfra
connection needs.
"""
