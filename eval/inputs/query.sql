-- monthly totals per customer
select c.name, c.city, sum(o.amount) as total, count(*) as orders
from customers c join orders o on o.customer_id = c.id
where o.status = 'paid' and o.created_at >= '2024-01-01' /* only this year */
group by c.name, c.city
order by total desc;
update customers set city = 'Berlin' where id = 7;
