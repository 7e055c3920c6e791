#!/usr/bin/env python3
"""The control run for the live-migration test (crates/vswitch/tests/migration.rs):
the same guest, traffic and migrations with QEMU's own virtio-net on two taps bridged
in a namespace, and no vswitchd. A guest that fails here fails because of QEMU or the
guest, not the switch (README, "Live migration").

Usage, as root: scripts/migration-control.py RATE_BYTES_PER_S MIGRATIONS [IMAGE_DIR]
  IMAGE_DIR: the test guest (tests/vm/build-guest.sh DIR; default target/tmp/vm).
  $QEMU: the QEMU command (default qemu-system-x86_64).
Prints each migration's time, then OK (the 64 MiB arrived sha256-exact) or HANG."""
import os, subprocess, socket, sys, time, threading, tempfile
RATE=int(sys.argv[1]); N=int(sys.argv[2])
ROOT=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
IMG=sys.argv[3] if len(sys.argv)>3 else os.path.join(ROOT, "target/tmp/vm")
NS=f"ctlmig{os.getpid()%10000}"; D=tempfile.mkdtemp(prefix="migctl")
os.makedirs(D, exist_ok=True)
import atexit
CHILDREN=[]
def cleanup():
    for c in CHILDREN:
        if c.poll() is None: c.kill(); c.wait()
    subprocess.run(["ip","netns","del",NS], capture_output=True)
atexit.register(cleanup)
def sh(c, check=True): return subprocess.run(c, shell=True, check=check, capture_output=True, text=True).stdout
sh(f"ip netns del {NS}", check=False)
sh(f"ip netns add {NS}; ip netns exec {NS} ip link set lo up; ip netns exec {NS} ip link add br0 type bridge; "
   f"ip netns exec {NS} ip addr add 10.0.0.2/24 dev br0; ip netns exec {NS} ip link set br0 up")
for t in ("tapA","tapB"):
    sh(f"ip netns exec {NS} ip tuntap add {t} mode tap; ip netns exec {NS} ip link set {t} master br0 up")
class Vm:
    def __init__(s, name, tap, incoming=None):
        s.name=name; s.mon=f"{D}/{name}.mon"; s.lines=[]
        for p in (s.mon,):
            if os.path.exists(p): os.unlink(p)
        cmd=["ip","netns","exec",NS]+os.environ.get("QEMU","qemu-system-x86_64").split()+["-accel","tcg","-M","pc","-cpu","qemu64","-m","512M","-smp","1",
             "-nodefaults","-display","none","-serial","stdio","-no-reboot","-kernel",f"{IMG}/vmlinux","-initrd",f"{IMG}/initrd.cpio.gz",
             "-append","console=ttyS0 quiet panic=-1 vm.ip=10.0.0.1 vm.peer=10.0.0.2 vm.test=sink vm.stay=1",
             "-object","memory-backend-memfd,id=mem,size=512M,share=on","-numa","node,memdev=mem",
             "-netdev",f"tap,id=n0,ifname={tap},script=no,downscript=no,vhost=off",
             "-device","virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a,vectors=0",
             "-monitor",f"unix:{s.mon},server=on,wait=off"]
        if incoming: cmd+=["-incoming",incoming]
        s.p=subprocess.Popen(cmd,stdin=subprocess.DEVNULL,stdout=subprocess.PIPE,stderr=subprocess.STDOUT,text=True)
        CHILDREN.append(s.p)
        threading.Thread(target=s.read,daemon=True).start()
    def read(s):
        for l in s.p.stdout: s.lines.append(l.rstrip()); 
    def hmp(s, c):
        t0=time.time()
        while True:
            try:
                k=socket.socket(socket.AF_UNIX); k.connect(s.mon); break
            except OSError:
                assert time.time()-t0<20, (s.name, s.lines[-20:]); time.sleep(0.02)
        def prompt():
            b=b""
            while not b.endswith(b"(qemu) "):
                x=k.recv(4096); assert x; b+=x
            return b.decode(errors="replace")
        prompt(); k.sendall((c+"\n").encode()); out=prompt(); k.close(); return out
    def wait(s, prefix, n, t):
        t0=time.time()
        while sum(1 for l in s.lines if l.startswith(prefix))<n:
            if time.time()-t0>t: return False
            time.sleep(0.05)
        return True
    def kill(s): s.p.kill(); s.p.wait()
vm=Vm("m0","tapA")
assert vm.wait("RESULT ping",2,240), "\n".join(vm.lines)
print("guest up", flush=True)
ping=subprocess.Popen(["ip","netns","exec",NS,"ping","-q","-i","0.01","10.0.0.1"],stdout=subprocess.PIPE,text=True)
CHILDREN.append(ping)
BLOB=64<<20
sender_py=f"""
import socket,hashlib,os,signal,time
fast=[False]
signal.signal(signal.SIGUSR1, lambda *a: fast.__setitem__(0, True))
data=os.urandom({BLOB})
t0=time.time()
while True:
  try:
    s=socket.create_connection(('10.0.0.1',5001),timeout=5); break
  except OSError:
    assert time.time()-t0<120; time.sleep(0.2)
s.settimeout(None)
t0=time.time(); off=0
while off<len(data):
  n=65536
  if not fast[0]:
    ahead=off-(time.time()-t0)*{RATE}
    if ahead>0: time.sleep(min(ahead/{RATE},0.1)); continue
  s.sendall(data[off:off+n]); off+=n
s.shutdown(socket.SHUT_WR)
while s.recv(65536): pass
print('sent',len(data),hashlib.sha256(data).hexdigest(),flush=True)
"""
sender=subprocess.Popen(["ip","netns","exec",NS,"python3","-c",sender_py],stdout=subprocess.PIPE,text=True)
CHILDREN.append(sender)
taps=["tapA","tapB"]; at=0
for k in range(N):
    to=1-at; uri=f"unix:{D}/mig{k}.sock"
    if os.path.exists(uri[5:]): os.unlink(uri[5:])
    dst=Vm(f"m{k+1}",taps[to],uri)
    t0=time.time()
    while not os.path.exists(uri[5:]): assert time.time()-t0<60, dst.lines; time.sleep(0.02)
    vm.hmp("migrate_set_parameter max-bandwidth 4G"); vm.hmp("migrate_set_parameter downtime-limit 500")
    t0=time.time(); vm.hmp(f"migrate -d {uri}")
    while True:
        i=vm.hmp("info migrate")
        if "Migration status: completed" in i: break
        assert "failed" not in i and "cancelled" not in i, i
        time.sleep(0.025)
    print(f"migration {k}: {taps[at]}->{taps[to]} {time.time()-t0:.2f}s", flush=True)
    vm.kill(); vm=dst; at=to
os.kill(sender.pid, 10)
t0=time.time(); ok=True
while sender.poll() is None:
    if time.time()-t0>120:
        ok=False; break
    time.sleep(0.1)
if not ok:
    print("STALL: sender did not finish in 120 s")
    print(sh(f"ip netns exec {NS} ss -tin dport 5001"))
    print("\n".join(vm.lines[-30:]))
    sender.kill()
else:
    sent=sender.stdout.read().split()
    ok2=vm.wait("RESULT sink",1,120)
    got=[l for l in vm.lines if l.startswith("RESULT sink")]
    print("sent", sent, "got", got)
ping.send_signal(2); print(ping.communicate()[0].strip().splitlines()[-2:])
vm.kill(); sh(f"ip netns del {NS}", check=False)
print("OK" if ok else "HANG")
sys.exit(0 if ok else 1)
