// ns-3 (3.37) replay of configs/sim/ns3-crosscheck.toml, for cross-checking ccp-sim.
//
// Topology: N senders -- left router == bottleneck == right router -- N receivers, point-to-point
// links, global routing. TCP NewReno with SACK, no timestamps, classic (non-PRR) recovery, an ACK
// for every segment, initial window 10, minimum RTO 10 ms: the same transport as the ccp-sim
// scenario. The bottleneck queue is a FIFO queue disc of 100 full packets' bytes over a 1-packet device
// queue.
//
// Flows come from `ccp-sim flows` (one "id src dst bytes start_ns" per line, host indices as in
// ccp-sim's dumbbell: senders first). A flow's FCT runs from the moment its connection is
// established (ccp-sim has no handshake) until its receiver has every byte.
//
// Usage: dumbbell FLOWS_FILE OUT_CSV [key=value ...]   (see the defaults in main)
// Prints "events=N wall_s=X sim_s=Y bottleneck_bytes=B".

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

struct FlowSpec
{
    uint32_t id;
    uint32_t src;
    uint32_t dst;
    uint64_t bytes;
    uint64_t startNs;
};

struct FlowResult
{
    double connectedS = -1;
    double finishS = -1;
    uint64_t received = 0;
};

std::vector<FlowResult> g_results;
std::vector<FlowSpec> g_flows;

// Sends one flow's bytes as fast as the socket accepts them once connected.
class FlowSender : public Application
{
  public:
    void Setup(uint32_t index, Address peer)
    {
        m_index = index;
        m_peer = peer;
    }

  private:
    void StartApplication() override
    {
        m_socket = Socket::CreateSocket(GetNode(), TcpSocketFactory::GetTypeId());
        m_socket->Bind();
        m_socket->SetConnectCallback(MakeCallback(&FlowSender::Connected, this),
                                     MakeCallback(&FlowSender::Failed, this));
        m_socket->SetSendCallback(MakeCallback(&FlowSender::Writable, this));
        m_socket->Connect(m_peer);
    }

    void StopApplication() override
    {
        if (m_socket)
        {
            m_socket->Close();
        }
    }

    void Connected(Ptr<Socket> s)
    {
        g_results[m_index].connectedS = Simulator::Now().GetSeconds();
        Fill(s);
    }

    void Failed(Ptr<Socket>)
    {
        std::cerr << "flow " << m_index << ": connection failed\n";
    }

    void Writable(Ptr<Socket> s, uint32_t)
    {
        Fill(s);
    }

    void Fill(Ptr<Socket> s)
    {
        const uint64_t total = g_flows[m_index].bytes;
        while (m_sent < total)
        {
            uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(total - m_sent, 65536));
            chunk = std::min(chunk, s->GetTxAvailable());
            if (chunk == 0)
            {
                return;
            }
            int n = s->Send(Create<Packet>(chunk));
            if (n <= 0)
            {
                return;
            }
            m_sent += static_cast<uint64_t>(n);
        }
    }

    uint32_t m_index = 0;
    Address m_peer;
    Ptr<Socket> m_socket;
    uint64_t m_sent = 0;
};

void OnReceive(uint32_t index, Ptr<const Packet> p, const Address&)
{
    FlowResult& r = g_results[index];
    r.received += p->GetSize();
    if (r.finishS < 0 && r.received >= g_flows[index].bytes)
    {
        r.finishS = Simulator::Now().GetSeconds();
    }
}

} // namespace

int main(int argc, char* argv[])
{
    if (argc < 3)
    {
        std::cerr << "usage: dumbbell FLOWS_FILE OUT_CSV\n";
        return 2;
    }
    const uint32_t senders = 4, receivers = 4;
    const std::string accessRate = "10Gbps", accessDelay = "10us";
    const std::string bottleneckRate = "1Gbps", bottleneckDelay = "20us";
    // 100 full-size packets, counted in bytes as ccp-sim counts them (the queue disc sees IP
    // packets: 1500 B, without the 2 B PPP header ccp-sim includes).
    const uint32_t queueBytes = 100 * 1500;
    const uint32_t mss = 1460;
    const double maxSeconds = 10.0;

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpNewReno::GetTypeId()));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(16 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(16 << 20));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(10)));
    // A SYN lost in the full bottleneck queue would otherwise wait ns-3's default 3 s.
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(MilliSeconds(10)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(1)));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));

    std::ifstream in(argv[1]);
    std::string line;
    while (std::getline(in, line))
    {
        std::istringstream ls(line);
        FlowSpec f;
        if (ls >> f.id >> f.src >> f.dst >> f.bytes >> f.startNs)
        {
            g_flows.push_back(f);
        }
    }
    g_results.resize(g_flows.size());

    NodeContainer hosts, routers;
    hosts.Create(senders + receivers);
    routers.Create(2);
    InternetStackHelper stack;
    stack.Install(hosts);
    stack.Install(routers);

    PointToPointHelper access, bottleneck;
    access.SetDeviceAttribute("DataRate", StringValue(accessRate));
    access.SetChannelAttribute("Delay", StringValue(accessDelay));
    access.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
    bottleneck.SetDeviceAttribute("DataRate", StringValue(bottleneckRate));
    bottleneck.SetChannelAttribute("Delay", StringValue(bottleneckDelay));
    bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));

    TrafficControlHelper fifo;
    fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue(std::to_string(queueBytes) + "B"));

    Ipv4AddressHelper addr;
    std::vector<Ipv4Address> hostAddr(senders + receivers);
    for (uint32_t h = 0; h < senders + receivers; ++h)
    {
        Ptr<Node> router = routers.Get(h < senders ? 0 : 1);
        NetDeviceContainer d = access.Install(hosts.Get(h), router);
        // Large host queues: the hosts' own stacks never drop (ccp-sim's NICs pull from flows).
        TrafficControlHelper big;
        big.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("100000p"));
        big.Install(d);
        std::ostringstream net;
        net << "10." << (h / 250) << "." << (h % 250) << ".0";
        addr.SetBase(net.str().c_str(), "255.255.255.0");
        hostAddr[h] = addr.Assign(d).GetAddress(0);
    }
    NetDeviceContainer core = bottleneck.Install(routers.Get(0), routers.Get(1));
    fifo.Install(core);
    addr.SetBase("10.255.0.0", "255.255.255.0");
    addr.Assign(core);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    for (uint32_t i = 0; i < g_flows.size(); ++i)
    {
        const FlowSpec& f = g_flows[i];
        uint16_t port = static_cast<uint16_t>(10000 + (i % 50000));
        PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sa = sink.Install(hosts.Get(f.dst));
        sa.Start(Seconds(0));
        sa.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnReceive, i));
        Ptr<FlowSender> app = CreateObject<FlowSender>();
        app->Setup(i, InetSocketAddress(hostAddr[f.dst], port));
        hosts.Get(f.src)->AddApplication(app);
        app->SetStartTime(NanoSeconds(f.startNs));
    }

    Simulator::Stop(Seconds(maxSeconds));
    auto t0 = std::chrono::steady_clock::now();
    // Stop as soon as every flow has finished, like ccp-sim's stop_when_done.
    std::function<void()> check;
    check = [&check]() {
        for (const auto& r : g_results)
        {
            if (r.finishS < 0)
            {
                Simulator::Schedule(MilliSeconds(1), check);
                return;
            }
        }
        Simulator::Stop();
    };
    Simulator::Schedule(MilliSeconds(1), check);
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double simS = Simulator::Now().GetSeconds();
    uint64_t events = Simulator::GetEventCount();

    std::ofstream out(argv[2]);
    out << "id,src,dst,bytes,start_us,connected_us,finish_us,fct_us\n";
    uint64_t delivered = 0;
    for (uint32_t i = 0; i < g_flows.size(); ++i)
    {
        const FlowSpec& f = g_flows[i];
        const FlowResult& r = g_results[i];
        delivered += r.received;
        out << f.id << "," << f.src << "," << f.dst << "," << f.bytes << "," << f.startNs / 1000.0 << ","
            << (r.connectedS < 0 ? -1 : r.connectedS * 1e6) << "," << (r.finishS < 0 ? -1 : r.finishS * 1e6) << ","
            << ((r.finishS < 0 || r.connectedS < 0) ? -1 : (r.finishS - r.connectedS) * 1e6) << "\n";
    }
    std::cout << "events=" << events << " wall_s=" << wall << " sim_s=" << simS << " delivered_bytes=" << delivered << "\n";
    Simulator::Destroy();
    return 0;
}
