//! The robustness experiments' tools: the metrics flood, stopping the daemon over its
//! control socket, the link flap, and the spoofing, MAC-flooding and flow-flooding tenants.
//!
//! Invariants: every process started is a [`Child`], killed on drop. Cost: what each attack
//! sends, for its duration.

use super::*;

/// The port of `metrics-flood`'s metrics endpoint (on the NIC namespace's loopback).
pub const METRICS_PORT: u16 = 9464;
/// `metrics-flood`'s concurrent scrapes.
pub const METRICS_SCRAPES: u32 = 200;
/// `metrics-flood`'s idle connections to the metrics endpoint: more than it serves and
/// queues together, so some are closed unanswered.
pub const METRICS_IDLE: usize =
    weft_nic::ctl::MAX_METRICS_CONNECTIONS + weft_nic::ctl::METRICS_QUEUE + 200;

/// `metrics-flood`'s client (Python's standard library, with a descriptor limit raised
/// to what it needs where it may): `burst` makes [`METRICS_SCRAPES`]
/// scrapes at once and prints how many got the metrics; `hold` keeps [`METRICS_IDLE`]
/// connections open that send nothing, each opened again (at most 200 a second once all
/// were open) when the daemon closes it, and prints what it holds once a second.
pub(super) const METRICS_SCRIPT: &str = "import socket,sys,threading,json,time,resource,selectors\n\
    mode,port,n=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])\n\
    _,hard=resource.getrlimit(resource.RLIMIT_NOFILE)\n\
    lim=max(hard,n+512)\n\
    try:resource.setrlimit(resource.RLIMIT_NOFILE,(lim,lim))\n\
    except (ValueError,OSError):resource.setrlimit(resource.RLIMIT_NOFILE,(hard,hard))\n\
    addr=('127.0.0.1',port)\n\
    if mode=='burst':\n\
    \x20got=[];go=threading.Event()\n\
    \x20def scrape():\n\
    \x20\x20go.wait();b=b''\n\
    \x20\x20try:\n\
    \x20\x20\x20s=socket.create_connection(addr,timeout=10)\n\
    \x20\x20\x20s.sendall(b'GET /metrics HTTP/1.0\\r\\n\\r\\n')\n\
    \x20\x20\x20while True:\n\
    \x20\x20\x20\x20d=s.recv(65536)\n\
    \x20\x20\x20\x20if not d:break\n\
    \x20\x20\x20\x20b+=d\n\
    \x20\x20\x20s.close()\n\
    \x20\x20except OSError:pass\n\
    \x20\x20got.append(b.startswith(b'HTTP/1.0 200') and b'weft_dataplane_tx_frames_total' in b)\n\
    \x20ts=[threading.Thread(target=scrape) for _ in range(n)]\n\
    \x20for t in ts:t.start()\n\
    \x20t0=time.time();go.set()\n\
    \x20for t in ts:t.join()\n\
    \x20print(json.dumps({'scrapes':n,'answered':sum(got),'seconds':round(time.time()-t0,3)}))\n\
    \x20sys.exit(0)\n\
    sel=selectors.DefaultSelector();held=opened=closed=refused=peak=0;last=0;cap=n\n\
    while True:\n\
    \x20k=0\n\
    \x20while held<n and k<cap:\n\
    \x20\x20k+=1\n\
    \x20\x20try:s=socket.socket();s.settimeout(1);s.connect(addr)\n\
    \x20\x20except OSError:refused+=1;continue\n\
    \x20\x20s.setblocking(False);sel.register(s,selectors.EVENT_READ);held+=1;opened+=1\n\
    \x20cap=10;peak=max(peak,held);time.sleep(0.05)\n\
    \x20for key,_ in sel.select(0):\n\
    \x20\x20s=key.fileobj\n\
    \x20\x20try:d=s.recv(4096)\n\
    \x20\x20except BlockingIOError:continue\n\
    \x20\x20except OSError:d=b''\n\
    \x20\x20if not d:sel.unregister(s);s.close();held-=1;closed+=1\n\
    \x20if time.time()-last>=1:\n\
    \x20\x20last=time.time()\n\
    \x20\x20print(json.dumps({'held':held,'peak':peak,'opened':opened,'closed_by_server':closed,'refused':refused}),flush=True)\n";

/// `metrics-flood`'s client in the NIC's namespace, on the applications' CPUs.
pub(super) fn metrics_client(exp: &Experiment, tb: &Testbed, mode: &str, n: usize) -> Command {
    let mut c = pinned(exp, &tb.nic());
    c.args(["python3", "-c", METRICS_SCRIPT, mode])
        .arg(METRICS_PORT.to_string())
        .arg(n.to_string());
    c
}

/// `metrics-flood` while the traffic runs: [`METRICS_SCRAPES`] scrapes at once, then
/// [`METRICS_IDLE`] idle connections held (the returned child) while the control socket is
/// asked for stats every quarter of a second, as long as `more()`: the scrapes' answers (as
/// their client printed them) and the control socket's.
pub(super) fn metrics_flood(
    exp: &Experiment,
    tb: &Testbed,
    sock: &Path,
    more: impl Fn() -> bool,
) -> R<(Value, ControlAnswers, Child)> {
    let burst = output(
        &mut metrics_client(exp, tb, "burst", METRICS_SCRAPES as usize),
        &["python3 (metrics burst)"],
    )?;
    let burst: Value = serde_json::from_str(burst.trim()).unwrap_or(Value::Null);
    let hold = Child::spawn(metrics_client(exp, tb, "hold", METRICS_IDLE).stdout(Stdio::piped()))?;
    // Once the first connections are in, the control socket is asked throughout.
    std::thread::sleep(Duration::from_millis(1_500));
    let (mut asked, mut answered, mut max_ms) = (0u32, 0u32, 0.0f64);
    let mut errors = Vec::new();
    while more() {
        let t = Instant::now();
        asked += 1;
        match weft_nic::ctl::request(sock, &Request::Stats) {
            Ok(r) if r.to_json()["ok"] == true => answered += 1,
            Ok(r) => errors.push(r.to_json().to_string()),
            Err(e) => errors.push(e.to_string()),
        }
        max_ms = max_ms.max(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(250));
    }
    errors.truncate(5);
    let control = ControlAnswers {
        asked,
        answered,
        max_ms: (max_ms * 10.0).round() / 10.0,
        errors,
    };
    Ok((burst, control, hold))
}

/// Asks the daemon to `stop` over its control socket: the answer, and the seconds until
/// the daemon exited (null if it did not within 10 s).
pub(super) fn stop_over_ctl(d: &mut Child, sock: &Path) -> StopAnswer {
    let t = Instant::now();
    let answer = match weft_nic::ctl::request(sock, &Request::Stop) {
        Ok(r) => r.to_json(),
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut exited_s = None;
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = d.0.try_wait() {
            exited_s = Some((t.elapsed().as_secs_f64() * 1e3).round() / 1e3);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    StopAnswer { answer, exited_s }
}

/// Kills `c` and reads the last line it printed, as JSON (null if none).
pub(super) fn last_line(mut c: Child) -> Value {
    let _ = c.0.kill();
    let mut text = String::new();
    if let Some(mut o) = c.0.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut text);
    }
    let _ = c.0.wait();
    text.lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null)
}

/// How long `link-flap`'s uplink is down.
pub const LINK_DOWN: Duration = Duration::from_secs(2);

/// `link-flap`'s outage: the receiver's end of the uplink set down (the uplink's carrier
/// goes, as with a pulled cable) for [`LINK_DOWN`], then up. The outage's length as the
/// testbed timed it (ms: from the command that took the link down returning to the one that
/// brought it up returning), and the daemon's counters half a second into the outage and
/// at its end (what it sent meanwhile).
pub(super) fn link_flap(tb: &Testbed, sock: &Path) -> R<(u64, FlapCounters)> {
    let rx = tb.rx();
    nsx(&rx, &["ip", "link", "set", "eth0", "down"])?;
    let down = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let a = ask_stats(sock);
    std::thread::sleep(LINK_DOWN.saturating_sub(down.elapsed()));
    let b = ask_stats(sock);
    let up = nsx(&rx, &["ip", "link", "set", "eth0", "up"]);
    let down_ms = down.elapsed().as_millis() as u64;
    up?;
    let uplink_tx = |s: &Option<Stats>| {
        let p = s.as_ref()?.ports.iter().find(|p| p.iface() == "up")?;
        Some(match p {
            PortStats::AfPacket(p) => p.tx_frames,
            PortStats::AfXdp(p) => p.tx_frames,
        })
    };
    let (da, db) = (
        a.as_ref().map(|s| &s.dataplane),
        b.as_ref().map(|s| &s.dataplane),
    );
    let during = FlapCounters {
        uplink_up: [da.map(|d| d.uplink_up), db.map(|d| d.uplink_up)],
        tx_frames: [da.map(|d| d.tx_frames), db.map(|d| d.tx_frames)],
        uplink_port_tx_frames: [uplink_tx(&a), uplink_tx(&b)],
        engine_drops: [da.map(|d| d.engine_drops), db.map(|d| d.engine_drops)],
    };
    Ok((down_ms, during))
}

/// In tenant `k`'s namespace, a process that sends a UDP frame with tenant 1's source MAC
/// address every 10 ms for `seconds` (raw `AF_PACKET`, from Python's standard library):
/// what a tenant that wants another's return traffic does.
pub(super) fn spoofer(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    let victim = nsx(&tb.tenant(1), &["cat", "/sys/class/net/eth0/address"])?;
    const SCRIPT: &str = "import socket,sys,time\n\
        src=bytes.fromhex(sys.argv[1].strip().replace(':',''))\n\
        f=bytes.fromhex('020000000099')+src+bytes.fromhex('0800'\
        '4500001c0000400040110000c0a80001c0a80002'\
        'd431d43100080000')\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        end=time.time()+float(sys.argv[2])\n\
        while time.time()<end:\n s.send(f)\n time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(victim.trim())
            .arg(seconds.to_string())
            .stdout(Stdio::null()),
    )
}

/// Frames a second of the `mac-flood` experiment's flooder, each from a new source MAC.
pub const MAC_FLOOD_PER_S: u32 = 10_000;

/// In tenant `k`'s namespace, a process that sends UDP frames to the receiver from the
/// tenant's own IP address, each with a new random (unicast, locally administered) source
/// MAC address and the same ports, [`MAC_FLOOD_PER_S`] a second for `seconds` (raw
/// `AF_PACKET`, from Python's standard library), as `macof` does to a switch's table.
pub(super) fn mac_flooder(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    const SCRIPT: &str = "import socket,sys,time,os,struct\n\
        h=bytearray(bytes.fromhex('4500002000004000401100000000000000000000'))\n\
        h[12:20]=socket.inet_aton(sys.argv[1])+socket.inet_aton(sys.argv[2])\n\
        c=sum(struct.unpack('!10H',bytes(h)))\n\
        c=(c&0xffff)+(c>>16)\n\
        c=(c&0xffff)+(c>>16)\n\
        h[10:12]=struct.pack('!H',c^0xffff)\n\
        t=bytes.fromhex('0800')+bytes(h)+struct.pack('!HHHH',40000,9,12,0)+b'weft'\n\
        d=bytes.fromhex('020000000099')\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        n=int(sys.argv[4])//100\n\
        end=time.time()+float(sys.argv[3])\n\
        while time.time()<end:\n\
        \x20for _ in range(n):\n\
        \x20\x20m=bytearray(os.urandom(6));m[0]=(m[0]&0xfc)|2\n\
        \x20\x20s.send(d+bytes(m)+t)\n\
        \x20time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(format!("10.77.0.{k}"))
            .arg(RX)
            .arg(seconds.to_string())
            .arg(MAC_FLOOD_PER_S.to_string())
            .stdout(Stdio::null()),
    )
}

/// New flows a second of the `flood` experiment's flooder.
pub const FLOOD_FLOWS_PER_S: u32 = 2_000;

/// In tenant `k`'s namespace, a process that sends UDP frames to the receiver from the
/// tenant's own MAC and IP addresses, each from a random source port, so each is a new
/// flow: [`FLOOD_FLOWS_PER_S`] a second for `seconds` (raw `AF_PACKET`, from Python's
/// standard library), as a tenant flooding with `hping3 --rand-source` from its own
/// address would.
pub(super) fn flooder(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    let mac = nsx(&tb.tenant(k), &["cat", "/sys/class/net/eth0/address"])?;
    const SCRIPT: &str = "import socket,sys,time,random,struct\n\
        src=bytes.fromhex(sys.argv[1].strip().replace(':',''))\n\
        ip=bytes(socket.inet_aton(sys.argv[2]))+socket.inet_aton(sys.argv[3])\n\
        h=bytearray(bytes.fromhex('4500002000004000401100000000000000000000'))\n\
        h[12:20]=ip\n\
        c=sum(struct.unpack('!10H',bytes(h)))\n\
        c=(c&0xffff)+(c>>16)\n\
        c=(c&0xffff)+(c>>16)\n\
        h[10:12]=struct.pack('!H',c^0xffff)\n\
        e=bytes.fromhex('020000000099')+src+bytes.fromhex('0800')+bytes(h)\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        n=int(sys.argv[5])//100\n\
        end=time.time()+float(sys.argv[4])\n\
        p=lambda:struct.pack('!HHHH',random.randrange(1024,65536),9,12,0)+b'weft'\n\
        while time.time()<end:\n for _ in range(n): s.send(e+p())\n time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(mac.trim())
            .arg(format!("10.77.0.{k}"))
            .arg(RX)
            .arg(seconds.to_string())
            .arg(FLOOD_FLOWS_PER_S.to_string())
            .stdout(Stdio::null()),
    )
}
