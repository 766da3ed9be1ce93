"""PCI ids rackcert recognises, in one home: vendors and device classes.

Vendor ids are the PCI-SIG assignments (the same numbers `lspci -nn` prints and vSphere's
HostPciDevice.vendorId carries, as a signed 16-bit value: mask with 0xFFFF). vSphere's
classId is the 16-bit class code, base class in the high byte (HostPciDevice.classId);
lspci's -n prints the same code.
"""

from __future__ import annotations

NVIDIA = 0x10DE  # NVIDIA Corporation (GPUs)
MELLANOX = 0x15B3  # Mellanox Technologies, now NVIDIA Networking (ConnectX)
INTEL = 0x8086
DELL = 0x1028

DISPLAY = 0x03  # base class: display controller (a GPU: 0x0300 VGA, 0x0302 3D)
NETWORK = 0x02  # base class: network controller (an Ethernet ConnectX: 0x0200)
SERIAL_BUS = 0x0C  # base class: serial bus controller (InfiniBand: 0x0C06)


def vendor(vendor_id: int | None) -> int:
    """The unsigned vendor id (vSphere types it as a signed short)."""
    return (vendor_id or 0) & 0xFFFF


def base_class(class_id: int) -> int:
    """The base class of a 16-bit class code (or of a 24-bit one with its prog-if)."""
    return class_id >> 16 if class_id > 0xFFFF else class_id >> 8


def is_nvidia_gpu(vendor_id: int | None, class_id: int) -> bool:
    return vendor(vendor_id) == NVIDIA and base_class(class_id) == DISPLAY


def is_mellanox_nic(vendor_id: int | None, class_id: int, *, infiniband: bool = True) -> bool:
    classes = (NETWORK, SERIAL_BUS) if infiniband else (NETWORK,)
    return vendor(vendor_id) == MELLANOX and base_class(class_id) in classes
